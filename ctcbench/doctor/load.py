"""Load a user's saved CTC tensors safely: ``.npz`` without pickle, ``.pt`` weights-only.

The file holds ``log_probs`` or ``logits`` or ``probs``, ``targets``, ``input_lengths``,
``target_lengths`` and optionally ``blank``; :func:`load_inputs` returns them as keyword
arguments for :func:`ctcbench.doctor.diagnose`.

Sizes are read before data: each ``.npz`` member's ``.npy`` header (shape and dtype) and the
inflated size its zip entry records, each member of torch's zip format likewise; a file whose
arrays claim more than ``max_bytes`` in all is refused before anything is allocated.
"""
from __future__ import annotations

import difflib
import math
import zipfile
import zlib
from pathlib import Path

import numpy as np

VALUE_KEYS = ("log_probs", "logits", "probs")
REQUIRED_KEYS = ("targets", "input_lengths", "target_lengths")
SUFFIXES = (".npz", ".pt", ".pth")
MAX_BYTES = 2 ** 28  # 256 MiB of arrays per file unless raised (ctcbench doctor --max-bytes)
NPY_VERSIONS = {(1, 0): np.lib.format.read_array_header_1_0,
                (2, 0): np.lib.format.read_array_header_2_0}


def load_inputs(path, *, max_bytes: int = MAX_BYTES, required=REQUIRED_KEYS,
                extra: tuple[str, ...] = ()) -> dict:
    """``{"log_probs"|"logits"|"probs": ..., "targets": ..., ..., ["blank": int]}`` from ``path``.

    Raises ``ValueError`` naming the file and what was expected for anything unreadable or
    malformed, or holding more than ``max_bytes`` bytes of arrays (checked on the headers,
    before reading), and ``FileNotFoundError`` when it does not exist. ``required``: the
    arrays beside the values that must be there (a decoder's check needs none); the others
    of ``REQUIRED_KEYS`` are returned where present, and so are the arrays named in ``extra``
    (a Transformers batch's raw ``labels``).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"FILE: expected an existing .npz or .pt file, got {str(path)!r}")
    suffix = path.suffix.lower()
    if suffix not in SUFFIXES:
        raise ValueError(f"FILE: expected a .npz or .pt file, got {path.name!r}")
    if not zipfile.is_zipfile(path):
        raise ValueError(f"{path.name}: expected a NumPy .npz archive (np.savez), got a file that "
                         "is not a zip archive" if suffix == ".npz" else
                         f"{path.name}: expected a torch.save'd dict of tensors loadable with "
                         "weights_only=True, got a file that is not torch's zip format (files "
                         "saved with _use_new_zipfile_serialization=False are not read: their "
                         "sizes cannot be checked before loading)")
    data = _load_npz(path, max_bytes) if suffix == ".npz" else _load_pt(path, max_bytes)
    given = [k for k in VALUE_KEYS if k in data]
    missing = [k for k in required if k not in data]
    if len(given) != 1 or missing:  # names as the file spells them, a control character escaped
        found = ", ".join(k if k.isprintable() else repr(k) for k in sorted(data))
        want = "exactly one of log_probs/logits/probs" if len(given) != 1 else ""
        want = ", ".join(filter(None, [want, *missing]))
        raise ValueError(f"{path.name}: expected arrays log_probs (or logits or probs)"
                         + "".join(f", {k}" for k in required) + f", got missing or ambiguous: "
                         f"{want}; found: {found or 'nothing'}")
    known = (*VALUE_KEYS, *REQUIRED_KEYS, "blank", *extra)
    near = {k: difflib.get_close_matches(k, known, n=1) for k in data if k not in known}
    for name, hint in near.items():  # a misspelt name is refused, never silently unread
        if hint:
            raise ValueError(f"{path.name}: {name}: expected an array named one of "
                             f"{', '.join(known)}, got {name!r} (did you mean {hint[0]!r}?)")
    out = {k: data[k] for k in (*given, *REQUIRED_KEYS, *extra) if k in data}
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


def _load_npz(path: Path, max_bytes: int) -> dict:
    try:
        with zipfile.ZipFile(path) as archive:
            members = [i for i in archive.infolist() if i.filename.endswith(".npy")]
            if not members and any(i.filename.endswith("/data.pkl") for i in archive.infolist()):
                raise ValueError(f"{path.name}: expected a NumPy .npz archive, got a torch.save "
                                 f"file (its data.pkl): name it .pt to read it as one")
            _check_members(path, members, max_bytes)
            out, total = {}, 0
            for info in members:
                with archive.open(info) as fp:
                    shape, fortran, dtype, nbytes = _npy_header(path, info, fp)
                    total += nbytes
                    if total > max_bytes:
                        _too_big(path, info.filename, f"an array header claiming shape {shape} "
                                 f"{dtype} = {nbytes} bytes", max_bytes,
                                 "" if nbytes > max_bytes else f" (with the arrays before it: {total})")
                    buf = bytearray(nbytes)  # the claimed size, now known to be within max_bytes
                    if fp.readinto(buf) != nbytes:
                        raise ValueError(f"{path.name}: {info.filename}: expected {nbytes} bytes "
                                         f"of {dtype} data after its header, got fewer "
                                         "(a truncated or inconsistent member)")
                    array = np.frombuffer(buf, dtype=dtype)
                    out[info.filename.removesuffix(".npy")] = (
                        array.reshape(shape[::-1]).T if fortran else array.reshape(shape))
            return out
    except (zipfile.BadZipFile, zlib.error, OSError, EOFError, NotImplementedError,
            RuntimeError, UnicodeDecodeError) as exc:  # zipfile: an unknown zip version, an
        # encrypted member, a member name that is not UTF-8
        raise ValueError(f"{path.name}: expected a NumPy .npz archive, got an unreadable file "
                         f"({type(exc).__name__}: {exc})") from None


def _check_members(path: Path, members: list, max_bytes: int) -> None:
    """Refuse zip members that inflate past ``max_bytes`` (one or together), from the sizes the
    archive records, before any is read; only stored and deflated members are read."""
    total = 0
    for info in members:
        if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
            raise ValueError(f"{path.name}: {info.filename}: expected a stored or deflated zip "
                             f"member (as np.savez and torch.save write), got compression type "
                             f"{info.compress_type}")
        total += info.file_size
        if total > max_bytes:
            how = (f"inflates to {info.file_size} bytes ({info.compress_size} in the file)"
                   if info.compress_type == zipfile.ZIP_DEFLATED else f"holds {info.file_size} bytes")
            _too_big(path, info.filename, f"a member that {how}", max_bytes,
                     "" if info.file_size > max_bytes else f" (with the members before it: {total})")


def _npy_header(path: Path, info, fp) -> tuple:
    """``(shape, fortran_order, dtype, nbytes)`` from one member's ``.npy`` header."""
    try:
        version = np.lib.format.read_magic(fp)
        if version not in NPY_VERSIONS:
            raise ValueError(f"format version {version[0]}.{version[1]} (1.0 or 2.0 expected)")
        shape, fortran, dtype = NPY_VERSIONS[version](fp)
    except ValueError as exc:
        raise ValueError(f"{path.name}: {info.filename}: expected a .npy header, got "
                         f"{str(exc).splitlines()[0]}") from None
    if any(d < 0 for d in shape):
        raise ValueError(f"{path.name}: {info.filename}: expected a .npy header of a shape of "
                         f"sizes >= 0, got shape {shape}")
    if dtype.hasobject:
        raise ValueError(f"{path.name}: expected plain numeric arrays, got {info.filename} of "
                         f"dtype {dtype} (object arrays need pickle, which is refused)")
    nbytes = math.prod(shape) * dtype.itemsize  # Python ints: a claim of 10**12 cannot overflow
    return shape, fortran, dtype, nbytes


def _too_big(path: Path, member: str, claim: str, max_bytes: int, context: str = ""):
    mib = f"{max_bytes / 2 ** 20:.4g} MiB; " if max_bytes >= 2 ** 20 else ""
    raise ValueError(f"{path.name}: {member}: expected at most {max_bytes} bytes ({mib}raise it "
                     f"with max_bytes= or --max-bytes), got {claim}{context}")



def _load_pt(path: Path, max_bytes: int) -> dict:
    import torch
    try:  # torch's zip format: data.pkl plus one member per storage, each of its byte size
        with zipfile.ZipFile(path) as archive:
            _check_members(path, archive.infolist(), max_bytes)
    except (zipfile.BadZipFile, OSError, EOFError, NotImplementedError, RuntimeError,
            UnicodeDecodeError) as exc:
        raise ValueError(f"{path.name}: expected a torch.save'd dict of tensors loadable with "
                         f"weights_only=True, got an unreadable file ({type(exc).__name__}: "
                         f"{exc})") from None
    try:
        obj = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as exc:  # a text file gives a bare KeyError, others pickle/zip errors
        text = str(exc).strip()
        first = f"{type(exc).__name__}: {text.splitlines()[0]}" if text else type(exc).__name__
        raise ValueError(f"{path.name}: expected a torch.save'd dict of tensors loadable with "
                         f"weights_only=True, got an unreadable file ({first})") from None
    if not isinstance(obj, dict):
        raise ValueError(f"{path.name}: expected a dict of tensors, got {type(obj).__name__}")
    for k, v in obj.items():  # nested lists can share their rows: count before building
        count = _elements(v, max_bytes // 8 + 1)
        if count * 8 > max_bytes:
            _too_big(path, str(k), f"a nested list of more than {count - 1} numbers (8 bytes "
                     "each as an array)", max_bytes)
    return {str(k): _pt_value(path, str(k), v) for k, v in obj.items()}


def _elements(v, limit: int) -> int:
    """How many leaves the nested lists/tuples ``v`` hold, counting stops at ``limit``
    (a row referenced many times counts each time, as an array of it would)."""
    count, stack = 0, [v]
    while stack and count < limit:
        item = stack.pop()
        if isinstance(item, (list, tuple)):
            stack.extend(item)
        else:
            count += 1
    return count


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
                v.reshape(-1)[:0].numpy()  # a 0-d tensor too (a blank, a length)
            except (TypeError, RuntimeError):
                raise ValueError(f"{path.name}: {key}: expected a float or integer tensor "
                                 f"NumPy can hold (float16/32/64, bfloat16, int), got dtype "
                                 f"{str(v.dtype).removeprefix('torch.')}") from None
        return v
    try:
        return np.asarray(v)
    except ValueError:  # ragged lists
        raise ValueError(f"{path.name}: {key}: expected a tensor or a rectangular array, got "
                         f"a {type(v).__name__} with rows of different lengths") from None
