"""The worker protocol's frames: a length-prefixed JSON header, then ``.npz`` arrays (no pickle);
and a CTC problem as a frame's header and arrays.

    >I header length | header JSON | >Q blob length | np.savez blob (empty: no arrays)
"""
from __future__ import annotations

import io
import json
import struct

import numpy as np


def pack(header: dict, arrays: dict | None = None) -> bytes:
    head = json.dumps(header).encode()
    blob = b""
    if arrays:
        buf = io.BytesIO()
        np.savez(buf, **arrays)
        blob = buf.getvalue()
    return struct.pack(">I", len(head)) + head + struct.pack(">Q", len(blob)) + blob


def unpack_arrays(blob: bytes) -> dict:
    if not blob:
        return {}
    with np.load(io.BytesIO(blob), allow_pickle=False) as npz:
        return {k: npz[k] for k in npz.files}


def read_exact(stream, n: int) -> bytes | None:
    """``n`` bytes from a blocking stream, or None when it ends first."""
    data = stream.read(n)
    if len(data) < n:
        return None
    return data


def problem_frame(problem, grad_weights, op: str = "run") -> tuple[dict, dict]:
    """A request's header and arrays carrying ``problem`` (and ``grad_weights (N,)``)."""
    header = {"op": op, "blank": problem.blank, "dtype": problem.dtype,
              "target_layout": problem.target_layout, "index_dtype": problem.index_dtype}
    arrays = {"logits": problem.logits, "targets": problem.targets,
              "input_lengths": problem.input_lengths, "target_lengths": problem.target_lengths}
    if grad_weights is not None:
        arrays["grad_weights"] = np.asarray(grad_weights, dtype=np.float64)
    return header, arrays


def problem_from_frame(header: dict, arrays: dict):
    """The problem :func:`problem_frame` sent, rebuilt (and checked) by ``CTCProblem``."""
    from ctcbench.core.problem import CTCProblem

    problem = CTCProblem(arrays["logits"], arrays["targets"], arrays["input_lengths"],
                         arrays["target_lengths"], blank=header["blank"])
    # bfloat16 travels as float32, as CTCProblem holds it; the caller's target form too
    problem.dtype = header["dtype"]
    problem.target_layout, problem.index_dtype = header["target_layout"], header["index_dtype"]
    return problem
