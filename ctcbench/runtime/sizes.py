"""Benchmark sizes: ``Size`` (T, N, C, L), the named grids, grid files, and the random
full-length problem measured at each size."""
from __future__ import annotations

import csv
import json
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ctcbench.core.problem import CTCProblem
from ctcbench.files import read_text
from ctcbench.errors import expect, fail

DTYPES = ("float32", "float64")  # what bench and the datasheet measure speed in
# one bench row per key, in a run and a baseline (rows saved before "threads" existed: 1 thread)


@dataclass(frozen=True)
class Size:
    """One benchmark size: ``T`` frames, ``N`` batch, ``C`` classes (blank included),
    ``L`` labels per target (every target has exactly L labels, every input T frames)."""

    T: int
    N: int
    C: int
    L: int

    @property
    def cells(self) -> int:
        """Dynamic-programming cells of one pass, ``T * N * S`` with ``S = 2L + 1``."""
        return self.T * self.N * (2 * self.L + 1)

    @property
    def label(self) -> str:
        return f"T={self.T} N={self.N} C={self.C} L={self.L}"


# The four sizes for the NumPy-vs-torch target.
TARGET_SIZES = [Size(1000, 32, 100, 200), Size(200, 16, 50, 40), Size(50, 8, 20, 10),
                Size(1000, 8, 5000, 100)]


def _sweeps(base: Size, **values) -> list[Size]:
    """``base`` with one letter varied at a time, e.g. ``T=[100, 200]``."""
    out = []
    for letter, vals in values.items():
        out += [Size(**{**asdict(base), letter: v}) for v in vals]
    return out


def _unique(sizes) -> list[Size]:
    return list(dict.fromkeys(sizes))


GRIDS: dict[str, list[Size]] = {
    "small": [Size(50, 8, 20, 10), Size(100, 8, 30, 20), Size(200, 16, 50, 40)],
    # how cost grows with T, with L (S = 2L + 1), with C (up to 5000) and with N
    "default": _unique(
        _sweeps(Size(200, 16, 50, 40), T=[50, 100, 200, 400, 800], L=[10, 40, 80],
                C=[20, 50, 500, 5000], N=[1, 4, 16, 64]) + TARGET_SIZES),
    "targets": list(TARGET_SIZES),
    "large": _unique(
        _sweeps(Size(1000, 32, 100, 200), T=[250, 500, 1000, 2000, 4000], L=[50, 200, 400],
                C=[100, 1000, 10000], N=[8, 32, 128]) + TARGET_SIZES),
}


def check_size(size: Size, where: str = "size") -> Size:
    for letter in "TNCL":
        v = getattr(size, letter)
        expect(isinstance(v, (int, np.integer)) and not isinstance(v, bool), f"{where} {letter}",
                "an integer", repr(v))
    expect(size.T >= 1 and size.N >= 1, where, "T >= 1 and N >= 1", size.label)
    expect(size.L >= 0 and size.T >= size.L, where, "0 <= L <= T (every target must fit)",
            size.label)
    expect(size.C >= (3 if size.L > 1 else 2), where,
            "C >= 3 (blank plus two labels, so targets need no adjacent repeats)", size.label)
    return size


def load_grid(grid: str) -> list[Size]:
    """A named grid (``small``, ``default``, ``targets``, ``large``) or a JSON/CSV file of
    T, N, C, L rows."""
    if grid in GRIDS:
        return list(GRIDS[grid])
    path = Path(grid)
    if not path.is_file():
        fail("grid", f"one of {', '.join(GRIDS)} or a JSON/CSV file",
             f"{grid!r} ({'a folder' if path.is_dir() else 'no such file'})")
    text = read_text(path, f"grid {path}")
    if path.suffix.lower() == ".json":
        try:
            records = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"grid {path}: expected JSON, got a parse error ({exc})") from None
    else:
        records = [{(k or "").strip(): v for k, v in rec.items()}  # "T, N, C, L" headers too
                   for rec in csv.DictReader(text.splitlines())]
    expect(isinstance(records, list) and len(records) > 0, f"grid {path}",
            "a non-empty list of {T, N, C, L} rows", type(records).__name__ if not isinstance(
                records, list) else "an empty list")
    sizes = []
    for i, rec in enumerate(records):
        where = f"grid {path} row {i + 1}"
        expect(isinstance(rec, dict) and set("TNCL") <= set(rec), where,
                "fields T, N, C, L", rec)
        try:
            values = {k: int(str(rec[k]).strip()) for k in "TNCL"}
        except ValueError:
            raise ValueError(f"{where}: expected integers for T, N, C, L, got "
                             f"{ {k: rec[k] for k in 'TNCL'} }") from None
        sizes.append(check_size(Size(**values), where))
    return _unique(sizes)


def make_problem(size: Size, *, dtype: str = "float64", seed: int = 0) -> CTCProblem:
    """A random full-length problem of this size: logits N(0, 2^2), blank 0, every target
    exactly ``L`` labels with no adjacent repeats (so it fits in ``T >= L`` frames)."""
    check_size(size)
    expect(dtype in DTYPES, "dtype", f"one of {', '.join(DTYPES)}", dtype)
    T, N, C, L = size.T, size.N, size.C, size.L
    rng = np.random.default_rng(seed)
    logits = (rng.normal(size=(T, N, C)) * 2.0).astype(dtype)  # (T, N, C)
    targets = np.empty((N, L), dtype=np.int64)  # (N, L)
    if L:
        targets[:, 0] = rng.integers(1, C, size=N)
        for l in range(1, L):  # a label other than blank and the previous one
            step = rng.integers(1, C - 1, size=N)
            targets[:, l] = (targets[:, l - 1] - 1 + step) % (C - 1) + 1
    return CTCProblem(logits, targets, np.full(N, T), np.full(N, L))
