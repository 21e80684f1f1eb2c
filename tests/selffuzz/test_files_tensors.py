"""Self-fuzz of the tensor files ``ctcbench doctor FILE`` reads (.npz and .pt): a valid batch
with its arrays' dtypes, shapes and values mutated, its keys dropped, misspelt or added, and
its archive truncated, corrupted or given a lying .npy header."""
from __future__ import annotations

import io
import tempfile
import zipfile
from pathlib import Path

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from ctcbench.cli import cli
from ctcbench.doctor.load import REQUIRED_KEYS, VALUE_KEYS, load_inputs

from selffuzz.strategies_files import misspellings

DTYPES = ("float16", "float32", "float64", "int8", "int32", "int64", "uint8", "uint64", "bool",
          "complex64", "U3", "datetime64[s]", "V4", "object")
KEYS = (*VALUE_KEYS, *REQUIRED_KEYS, "blank")


@st.composite
def batches(draw) -> dict:
    """A valid batch: ``(T, N, C)`` log-probabilities, padded targets, lengths, maybe a blank."""
    T, N, C = draw(st.integers(1, 6)), draw(st.integers(1, 3)), draw(st.integers(2, 4))
    L = draw(st.integers(1, max(1, T // 2)))
    rng = np.random.default_rng(draw(st.integers(0, 99)))
    x = rng.normal(size=(T, N, C))
    out = {draw(st.sampled_from(VALUE_KEYS)): (x - np.log(np.exp(x).sum(-1, keepdims=True)))
           .astype(np.float32),
           "targets": rng.integers(1, C, size=(N, L)), "input_lengths": np.full(N, T),
           "target_lengths": rng.integers(0, L + 1, size=N)}
    if draw(st.booleans()):
        out["blank"] = np.int64(0)
    return out


def _retyped(a: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "object":
        return np.array([None, [1, 2]] if a.size < 2 else a.astype(object).ravel(), dtype=object)
    if dtype.startswith(("U", "V", "datetime")):
        return np.zeros(a.shape, dtype=dtype)
    with np.errstate(all="ignore"):
        try:
            return a.astype(dtype)
        except (TypeError, ValueError):  # text to numbers: the dtype with zeros
            return np.zeros(a.shape, dtype=dtype)


@st.composite
def mutated_batches(draw):
    """``(arrays, [what was done])``: 1-3 mutations of a valid batch."""
    arrays, done = draw(batches()), []
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.sampled_from(sorted(arrays)))
        a = np.asarray(arrays[key])
        op = draw(st.sampled_from(("dtype", "shape", "empty", "values", "drop", "misspell",
                                   "extra", "transpose", "scalar")))
        if op == "dtype":
            arrays[key] = _retyped(a, draw(st.sampled_from(DTYPES)))
        elif op == "shape":
            arrays[key] = a.reshape(-1) if a.ndim > 1 else a.reshape(1, *a.shape, 1)
        elif op == "empty" and a.ndim:
            arrays[key] = np.take(a, [], axis=draw(st.integers(0, a.ndim - 1)))
        elif op == "values" and a.size and a.dtype.kind in "iuf":
            value = draw(st.sampled_from((np.nan, np.inf, -np.inf, -1, 0, 2**31, -2**62, 1e30)))
            whole = a.dtype.kind in "iu" and abs(value) < 2**62 and float(value).is_integer()
            flat = a.astype(np.int64 if whole else np.float64).ravel()  # holds the value
            flat[draw(st.integers(0, flat.size - 1))] = value
            arrays[key] = flat.reshape(a.shape)
        elif op == "drop":
            del arrays[key]
        elif op == "misspell" and misspellings(key):
            new = draw(st.sampled_from(misspellings(key)))
            arrays[new] = arrays.pop(key)
            done.append((op, new))  # the name the file holds
            continue
        elif op == "extra":
            arrays[draw(st.sampled_from(KEYS))] = a
        elif op == "transpose" and a.ndim == 3:
            arrays[key] = a.transpose(1, 0, 2)  # N and T swapped: batch-major
        elif op == "scalar":
            arrays[key] = a.reshape(-1)[:1].reshape(()) if a.size else np.float64(0)
        else:
            continue
        done.append((op, key))
    return arrays, done


def _npz_bytes(arrays: dict) -> bytes:
    buf = io.BytesIO()
    np.savez(buf, **arrays)  # object arrays are pickled, as a careless np.savez writes them
    return buf.getvalue()


def _pt_bytes(arrays: dict, as_list: bool) -> bytes:
    buf = io.BytesIO()
    obj = {}
    for k, a in arrays.items():
        try:
            obj[k] = a.tolist() if as_list else torch.from_numpy(np.ascontiguousarray(a))
        except TypeError:  # a dtype torch has no tensor of: saved as a nested list
            obj[k] = a.tolist()
    torch.save(obj, buf)
    return buf.getvalue()


@st.composite
def damaged(draw, data: bytes) -> tuple[bytes, str]:
    """The file's bytes, maybe truncated, with a byte changed, or its .npy header lying."""
    how = draw(st.sampled_from(("whole", "whole", "truncate", "flip", "lie")))
    if how == "truncate":
        return data[:draw(st.integers(0, len(data) - 1))], how
    if how == "flip":
        i = draw(st.integers(0, len(data) - 1))
        return data[:i] + bytes([data[i] ^ draw(st.integers(1, 255))]) + data[i + 1:], how
    if how == "lie" and data[:2] == b"PK":
        return _lying(data, draw(st.sampled_from(("(1000000, 1000000, 9)", "(0,)", "(7, 3, 2)",
                                                  "(-1,)", "()"))),
                      draw(st.sampled_from(("<f4", "<f8", "|O", "<i8", ">u2")))), how
    return data, "whole"


def _lying(data: bytes, shape: str, descr: str) -> bytes:
    """Every member's .npy header rewritten to claim ``shape`` and ``descr``, data kept."""
    src, out = zipfile.ZipFile(io.BytesIO(data)), io.BytesIO()
    with zipfile.ZipFile(out, "w") as dst:
        for info in src.infolist():
            body = src.read(info)
            if info.filename.endswith(".npy") and body[:6] == b"\x93NUMPY":
                n = int.from_bytes(body[8:10], "little")
                header = f"{{'descr': '{descr}', 'fortran_order': False, 'shape': {shape}, }}"
                header = header.ljust(n - 1) + "\n" if len(header) < n else header + "\n"
                body = body[:8] + len(header).to_bytes(2, "little") + header.encode() + body[10 + n:]
            dst.writestr(info.filename, body)
    return out.getvalue()


def judge_tensor_file(oracle, data: bytes, suffix: str, what: str, *,
                      misspelt: bool = False) -> None:
    """Load the file with the doctor's loader, then diagnose it with ``ctcbench doctor``;
    ``misspelt``: an array's name is misspelt, which must be refused."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "batch" + suffix)
        path.write_bytes(data)
        try:
            with oracle.bounded(what=what):
                load_inputs(path)
        except oracle.Finding:
            raise
        except Exception as exc:
            oracle.record(f"doctor loader ({suffix})", oracle.check_error(exc, what))
        else:
            oracle.record(f"doctor loader ({suffix})", None)
            assert not misspelt, f"{what}: an array with a misspelt name was not refused"
        with oracle.bounded(what=what):
            result = CliRunner().invoke(cli, ["doctor", str(path), "--format", "json"])
        oracle.record(f"ctcbench doctor ({suffix})", oracle.check_cli(result, what))


@settings(parent=settings.get_profile("ctcbench-selffuzz"))
@given(batch=mutated_batches(), data=st.data(), suffix=st.sampled_from([".npz", ".pt"]),
       as_list=st.sampled_from([False, False, True]))
def test_mutated_tensor_file(oracle, batch, data, suffix, as_list):
    """A mutated or damaged .npz/.pt batch is diagnosed, or refused in one line naming the
    file and what was expected."""
    arrays, done = batch
    raw = _npz_bytes(arrays) if suffix == ".npz" else _pt_bytes(arrays, as_list)
    body, how = data.draw(damaged(raw), label="damage")
    what = f"{suffix} of {done}, {how}: " + ", ".join(
        f"{k}={np.asarray(v).dtype}{np.asarray(v).shape}" for k, v in arrays.items())
    judge_tensor_file(oracle, body, suffix, what,
                      misspelt=how == "whole" and any(op == "misspell" and k in arrays
                                                     for op, k in done))


def _npz(**arrays) -> bytes:
    base = {"log_probs": np.log(np.full((1, 1, 2), 0.5, np.float32)), "targets": np.array([[1]]),
            "input_lengths": np.array([1]), "target_lengths": np.array([1])}
    return _npz_bytes({**base, **arrays})


def _zip_version(data: bytes, version: int = 64) -> bytes:
    """The archive with each central directory entry asking for zip ``version`` (6.4) to
    extract, as one flipped byte of a real file did."""
    out, at = bytearray(data), data.find(b"PK\x01\x02")
    while at >= 0:
        out[at + 6] = version
        at = data.find(b"PK\x01\x02", at + 4)
    return bytes(out)


def _pt_raw(obj) -> bytes:
    buf = io.BytesIO()
    torch.save(obj, buf)
    return buf.getvalue()


# inputs the fuzz found, each answered before with a traceback, NumPy's words or silence:
# (bytes, suffix, what the one error line must say)
FOUND = {
    "nan-length": (_npz(input_lengths=np.array([np.nan])),
                   "input_lengths: expected an integer array, got dtype float64"),
    "text-length": (_npz(input_lengths=np.zeros(1, "U3")),
                    "input_lengths: expected an integer array"),
    "negative-header": (_lying(_npz(), "(-1,)", "<f4"),
                        "expected a .npy header of a shape of sizes >= 0, got shape (-1,)"),
    "zip-version": (_zip_version(_npz()), "batch.npz: expected a NumPy .npz archive, got an "
                    "unreadable file (NotImplementedError: zip file version 6.4)"),
    "empty-batch": (_npz_bytes({"log_probs": np.zeros((5, 0, 3), np.float32),
                                "targets": np.zeros((0, 2), np.int64),
                                "input_lengths": np.zeros(0, np.int64),
                                "target_lengths": np.zeros(0, np.int64)}),
                    "log_probs: expected a non-empty"),
    "member-name-not-utf8": (_npz_bytes({"aé": np.zeros(1)}).replace("é".encode(), b"\xc3\x28"),
                             "batch.npz: expected a NumPy .npz archive, got an unreadable file "
                             "(UnicodeDecodeError"),
    "ragged-list.pt": (_pt_raw({"log_probs": torch.zeros(1, 1, 2), "targets": [[1], [1, 2]],
                                "input_lengths": [1], "target_lengths": [1]}),
                       "batch.pt: targets: expected a tensor or a rectangular array, got a list "
                       "with rows of different lengths"),
    "control-character-name": (_npz_bytes({"log_probs": np.zeros((1, 1, 2)), "targets": np.array([[1]]),
                                            "input_lengths": np.array([1]),
                                            "t\x1drget_lengths": np.array([1])}),
                               "found: input_lengths, log_probs, 't\\x1drget_lengths', targets"),
    "misspelt-blank": (_npz(blnk=np.int64(1)), "blnk: expected an array named one of"),
    "missing-array": (_npz_bytes({"log_probs": np.zeros((1, 1, 2))}),
                      "expected arrays log_probs (or logits or probs), targets, input_lengths, "
                      "target_lengths, got missing or ambiguous"),
}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_found_tensor_file(oracle, name):
    """Each input the fuzz found is one error line in the form, saying what was wrong."""
    data, said = FOUND[name]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "batch" + (".pt" if name.endswith(".pt") else ".npz"))
        path.write_bytes(data)
        result = CliRunner().invoke(cli, ["doctor", str(path)])
    assert said in oracle.check_cli(result, name, ok=())
