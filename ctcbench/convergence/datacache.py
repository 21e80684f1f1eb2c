"""A folder of ``.npz`` entries that several processes may fill at once.

Each entry holds named arrays plus ``meta``: a 0-d JSON string saying what the arrays were built
from. Entries are written to a unique temporary name in the same folder and moved in with
``os.replace``, so a reader sees a whole file or none. Building an entry holds ``<entry>.lock``
(``fcntl.flock``); a process that finds the entry missing waits on that lock and then reads what the
first one built. Without ``fcntl`` (Windows) every process builds its own copy; the last rename wins.

A damaged (truncated, unreadable), foreign or stale entry is rebuilt, with one line on stderr that
names the file and the reason.
"""
from __future__ import annotations

import contextlib
import json
import os
import sys
import tempfile
import zipfile
import zlib
from pathlib import Path
from typing import Callable

import numpy as np

from ctcbench.files import atomic_write

try:
    import fcntl
except ImportError:  # Windows: no locks, each process builds its own copy
    fcntl = None

Arrays = dict  # name -> np.ndarray
Layout = dict  # name -> (shape, dtype) the arrays must have


DEFAULT_CACHE_DIR = Path("reports/.data-cache")  # ``--cache-dir``'s default


def check_cache_dir(cache_dir, *, create: bool = False, name: str = "--cache-dir") -> Path | None:
    """Check that ``cache_dir`` is, or can be made as, a folder a file can be written in; with
    ``create`` make it. ``None`` passes. Without ``create`` nothing is left on disk: the probe
    file goes into the nearest folder that exists.

    Raises ``ValueError`` naming ``name`` and the path when the folder cannot be made or written
    (a regular file in the way, no permission, a read-only file system).
    """
    if cache_dir is None:
        return None
    path = Path(cache_dir)
    if path == DEFAULT_CACHE_DIR:  # the user may never have typed it
        name = f"{name} (its default {DEFAULT_CACHE_DIR}; pass {name} DIR for another)"
    try:
        existing = next(p for p in (path, *path.parents) if p.exists())  # "." or "/" at the latest
        if not existing.is_dir():
            raise ValueError(f"{name}: expected a folder, got {str(path)!r} "
                             f"({str(existing)!r} is a regular file)")
        if create:
            path.mkdir(parents=True, exist_ok=True)
            existing = path
        fd, probe = tempfile.mkstemp(dir=existing, prefix=".write-probe-")
        os.close(fd)
        os.unlink(probe)
    except OSError as exc:
        raise ValueError(f"{name}: expected a writable folder, got {str(path)!r} "
                         f"({exc.strerror or exc})") from None
    return path


def load_or_build(path: Path, meta: dict, build: Callable[[], Arrays], *, layout: Layout) -> Arrays:
    """The arrays stored at ``path`` if its ``meta`` equals ``meta`` and they match ``layout``;
    otherwise ``build()`` them (under the entry's lock), store them, and return them."""
    path = Path(path)
    meta = json.loads(json.dumps(meta, sort_keys=True))  # compare as it will read back
    arrays, _ = read_entry(path, meta, layout)
    if arrays is not None:
        return arrays
    with entry_lock(path):
        arrays, reason = read_entry(path, meta, layout)  # another process may have built it
        if arrays is not None:
            return arrays
        if reason is not None:
            print(f"data cache: rebuilding {path} ({reason})", file=sys.stderr, flush=True)
        arrays = build()
        write_entry(path, arrays, meta)
        return arrays


def read_entry(path: Path, meta: dict, layout: Layout) -> tuple[Arrays | None, str | None]:
    """``(arrays, None)`` for a good entry, ``(None, None)`` for none, ``(None, why)`` for a bad one."""
    try:
        with np.load(path, allow_pickle=False) as z:
            if "meta" not in z.files:
                return None, "no record of what it was built from"
            stored = json.loads(str(z["meta"]))
            arrays = {k: z[k] for k in layout if k in z.files}  # reads (and CRC-checks) every array
    except FileNotFoundError:
        return None, None
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile, zlib.error) as exc:
        return None, f"damaged: {type(exc).__name__}: {exc}"
    why = mismatch(stored, meta)
    if why is not None:
        return None, why
    for k, (shape, dtype) in layout.items():
        got = arrays.get(k)
        if got is None or got.shape != tuple(shape) or got.dtype != np.dtype(dtype):
            desc = "missing" if got is None else f"{got.dtype} {got.shape}"
            return None, f"damaged: {k}: expected {np.dtype(dtype)} {tuple(shape)}, got {desc}"
    return arrays, None


def mismatch(stored, meta: dict) -> str | None:
    """Why an entry built from ``stored`` does not serve ``meta`` (None if it does)."""
    if not isinstance(stored, dict):
        return "damaged: meta is not a JSON object"
    if stored == meta:
        return None
    old, new = stored.get("versions"), meta.get("versions")
    if {k: v for k, v in stored.items() if k != "versions"} == \
            {k: v for k, v in meta.items() if k != "versions"} and isinstance(old, dict):
        changed = ", ".join(f"{k} {old.get(k)} -> {new.get(k)}" for k in sorted(set(old) | set(new))
                            if old.get(k) != new.get(k))
        return f"stale: built with other library versions: {changed}"
    return "foreign: built from another data config"


@contextlib.contextmanager
def entry_lock(path: Path):
    """Hold an exclusive ``flock`` on ``<entry>.lock`` (a no-op without ``fcntl``).

    The lock file stays in place: removing it would let two processes lock different files.
    """
    if fcntl is None:
        yield
        return
    with open(path.with_suffix(".lock"), "a") as f:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX)  # blocks while another process builds
        try:
            yield
        finally:
            fcntl.flock(f.fileno(), fcntl.LOCK_UN)


def write_entry(path: Path, arrays: Arrays, meta: dict) -> None:
    """Write ``arrays`` and ``meta`` to a unique temporary file beside ``path``, then rename it in."""
    atomic_write(path, lambda f: np.savez_compressed(
        f, meta=np.array(json.dumps(meta, sort_keys=True)), **arrays))
