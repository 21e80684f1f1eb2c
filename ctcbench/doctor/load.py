"""Load a user's saved CTC tensors safely: ``.npz`` without pickle, ``.pt`` weights-only.

The file holds ``log_probs`` or ``logits`` or ``probs``, ``targets``, ``input_lengths``,
``target_lengths`` and optionally ``blank``; :func:`load_inputs` returns them as keyword
arguments for :func:`ctcbench.doctor.diagnose`.
"""
from __future__ import annotations

import zipfile
from pathlib import Path

import numpy as np

VALUE_KEYS = ("log_probs", "logits", "probs")
REQUIRED_KEYS = ("targets", "input_lengths", "target_lengths")
SUFFIXES = (".npz", ".pt", ".pth")


def load_inputs(path) -> dict:
    """``{"log_probs"|"logits"|"probs": ..., "targets": ..., ..., ["blank": int]}`` from ``path``.

    Raises ``ValueError`` naming the file and what was expected for anything unreadable or
    malformed, and ``FileNotFoundError`` when it does not exist.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"FILE: expected an existing .npz or .pt file, got {str(path)!r}")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"FILE: expected a .npz or .pt file, got {path.name!r}")
    data = _load_npz(path) if suffix == ".npz" else _load_pt(path)
    given = [k for k in VALUE_KEYS if k in data]
    missing = [k for k in REQUIRED_KEYS if k not in data]
    if len(given) != 1 or missing:
        want = "exactly one of log_probs/logits/probs" if len(given) != 1 else ""
        want = ", ".join(filter(None, [want, *missing]))
        raise ValueError(f"{path.name}: expected arrays log_probs (or logits or probs), targets, "
                         f"input_lengths, target_lengths; missing or ambiguous: {want}; "
                         f"found: {', '.join(sorted(data)) or 'nothing'}")
    out = {k: data[k] for k in (*given, *REQUIRED_KEYS)}
    if "blank" in data:
        blank = data["blank"]
        blank = np.asarray(blank.tolist() if hasattr(blank, "tolist") else blank)
        whole = blank.size == 1 and blank.dtype.kind in "iuf"
        if whole and blank.dtype.kind == "f":  # inf % 1 warns: test finiteness first
            value = float(blank.reshape(()))
            whole = np.isfinite(value) and value.is_integer()
        if not whole:
            raise ValueError(f"{path.name}: blank: expected one integer, got "
                             f"{blank.dtype} of shape {blank.shape}"
                             + (f" ({blank.reshape(())})" if blank.size == 1 else ""))
        out["blank"] = int(blank.reshape(()))
    return out


def _load_npz(path: Path) -> dict:
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path.name}: expected a NumPy .npz archive (np.savez), got a file that "
                         "is not a zip archive")
    try:
        with np.load(path, allow_pickle=False) as f:
            return {k: f[k] for k in f.files}
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise ValueError(f"{path.name}: expected a NumPy .npz archive, got an unreadable file "
                         f"({type(exc).__name__}: {exc})") from None
    except ValueError as exc:  # object arrays need pickle, which is refused
        raise ValueError(f"{path.name}: expected plain numeric arrays, got {exc}") from None


def _load_pt(path: Path) -> dict:
    import torch
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a text file gives a bare KeyError, others pickle/zip errors
        text = str(exc).strip()
        first = f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
        raise ValueError(f"{path.name}: expected a torch.save'd dict of tensors loadable with "
                         f"weights_only=True, got an unreadable file ({first})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path.name}: expected a dict of tensors, got {type(obj).__name__}")
    return {str(k): _pt_value(path, str(k), v) for k, v in obj.items()}


def _pt_value(path: Path, key: str, v):
    """A dense tensor NumPy can hold (kept a tensor: bfloat16 keeps its name, and so its
    tolerance), or anything else as a NumPy array; else ValueError naming file and key."""
    import torch
    if isinstance(v, torch.Tensor):
        v = v.detach().cpu()
        if v.layout != torch.strided:
            raise ValueError(f"{path.name}: {key}: expected a dense tensor, got layout "
                             f"{str(v.layout).removeprefix('torch.')} (save x.to_dense())")
        if v.dtype != torch.bfloat16:
            try:
                v[:0].numpy()
            except (TypeError, RuntimeError):
                raise ValueError(f"{path.name}: {key}: expected a float or integer tensor "
                                 f"NumPy can hold (float16/32/64, bfloat16, int), got dtype "
                                 f"{str(v.dtype).removeprefix('torch.')}") from None
        return v
    try:
        return np.asarray(v)
    except ValueError as exc:  # ragged lists
        raise ValueError(f"{path.name}: {key}: expected a tensor or a rectangular array, got "
                         f"{type(v).__name__} ({str(exc).split('.')[0]})") from None
