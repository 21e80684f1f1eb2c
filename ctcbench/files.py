"""Reading and writing the files ctcbench makes: text read with a clear error, JSON that
spells inf and nan, and writes that a reader never sees half done."""
from __future__ import annotations

import contextlib
import json
import math
import os
import sys
import tempfile
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import BinaryIO

import numpy as np

from ctcbench.errors import fail


def read_text(path: Path, what: str) -> str:
    """A text file's contents (UTF-8, a byte-order mark dropped), or a ValueError naming
    ``what`` ("grid sizes.csv") when it is not text or cannot be read."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        fail(what, "a UTF-8 text file", f"undecodable bytes at position {exc.start}")
    except OSError as exc:  # a folder, no permission, an I/O error: said with the path
        fail(what, "a readable text file", f"{str(path)!r} ({exc.strerror or type(exc).__name__})")


def parse_text(text: str, what: str, fmt: str, expected: str | None = None):
    """``text`` parsed as ``fmt`` ("JSON" or "TOML"), or a ValueError naming ``what``:
    ``WHAT: expected valid TOML, got a parse error: ...``. Text the parsers cannot take in
    their own words (nesting past Python's recursion limit, a number of thousands of digits)
    is refused alike."""
    expected = expected or f"valid {fmt}"
    try:
        return json.loads(text) if fmt == "JSON" else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        fail(what, expected, f"a parse error: {exc}")
    except RecursionError:
        fail(what, expected, "lists or tables nested too deep to read")
    except ValueError:  # int(): "Exceeds the limit (4300 digits) for integer string conversion"
        fail(what, expected, f"a number longer than {sys.get_int_max_str_digits()} digits")


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)  # "inf", "-inf", "nan": JSON has no such numbers
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, Path):
        return str(x)
    return x


def to_json(obj, **kwargs) -> str:
    """JSON with inf/nan spelled as strings and NumPy scalars unwrapped."""
    return json.dumps(_jsonable(obj), **kwargs)


def _umask() -> int:
    """The process's umask, read without setting it (``os.umask`` can only swap it, which
    would hand another thread a umask of 0 for a moment)."""
    with contextlib.suppress(OSError, ValueError):
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("Umask:"):
                return int(line.split()[1], 8)
    old = os.umask(0o022)
    os.umask(old)
    return old


def atomic_write(path: Path, data: bytes | str | Callable[[BinaryIO], object]) -> Path:
    """Write ``data`` (text, bytes, or a function that writes into a binary file) to ``path``
    through a temporary file beside it, fsync'ed and renamed over it: a reader, or a run
    killed mid-write, sees the old file or the new one, never half of one. The file gets the
    mode the umask gives any new file (``mkstemp``'s own is 0600, unreadable to others)."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~_umask())
        with os.fdopen(fd, "wb") as f:
            if callable(data):
                data(f)
            else:
                f.write(data.encode("utf-8") if isinstance(data, str) else data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise
    return path


def check_output_file(path, option: str, what: str, suffixes: tuple[str, ...]) -> Path:
    """``path``, checked before any work so that a bad one cannot fail a run at its end: it
    ends in one of ``suffixes`` and lies in an existing, writable folder. The errors name
    ``option`` (``--html``) and say what is wrong."""
    path = Path(path)
    if path.suffix.lower() not in suffixes:
        fail(option, f"{what} path ending in {' or '.join(suffixes)}", repr(str(path)))
    folder = path.parent
    if not folder.is_dir() or not os.access(folder, os.W_OK):
        why = ("is not writable" if folder.is_dir() else
               "is a file, not a folder" if folder.exists() else "does not exist")
        fail(option, f"{what} path in an existing, writable folder",
             f"{str(path)!r} ({folder} {why})")
    return path
