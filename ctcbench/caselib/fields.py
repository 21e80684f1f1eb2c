"""Typed readers for the values of a case file's tables.

Each reader takes the raw value (from TOML or JSON) and ``where``, the field's full name
(``"case 'x' build.sample[0].T"``), and returns the value in the type the builders use, or
raises ``ValueError("WHERE: expected X, got Y")``. Numbers are range-checked as read, before
any cast, so nothing wraps or is taken modulo something.
"""
from __future__ import annotations

import difflib
import math

import numpy as np

from ctcbench.errors import fail


def _is_int(value) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def integer(value, where: str, *, lo: int | None = None, hi: int | None = None) -> int:
    """An int (not a bool, not a float) in ``[lo, hi]``."""
    span = (f" >= {lo}" if hi is None else f" in [{lo}, {hi}]") if lo is not None else (
        f" <= {hi}" if hi is not None else "")
    if not _is_int(value):
        fail(where, f"an integer{span}", repr(value))
    if (lo is not None and value < lo) or (hi is not None and value > hi):
        fail(where, f"an integer{span}", repr(value))
    return int(value)


def number(value, where: str, *, lo: float | None = None, hi: float | None = None,
           finite: bool = True, lo_open: bool = False) -> float:
    """A float or int (not a bool); finite unless ``finite=False`` (then NaN/inf pass)."""
    span = []
    if lo is not None:
        span.append(f"{'>' if lo_open else '>='} {lo:g}")
    if hi is not None:
        span.append(f"<= {hi:g}")
    want = ("a finite number" if finite else "a number") + (" " + " and ".join(span) if span else "")
    if not isinstance(value, (int, float, np.integer, np.floating)) or isinstance(value, bool):
        fail(where, want, repr(value))
    value = float(value)
    if math.isnan(value) or math.isinf(value):
        if finite:
            fail(where, want, repr(value))
        return value
    if lo is not None and (value <= lo if lo_open else value < lo):
        fail(where, want, repr(value))
    if hi is not None and value > hi:
        fail(where, want, repr(value))
    return value


def int_list(value, where: str, *, lo: int, hi: int, blank: int | None = None) -> list[int]:
    """A list of ints in ``[lo, hi]``, none equal to ``blank`` (a label is never the blank)."""
    want = f"a list of integers in [{lo}, {hi}]" + (
        f" other than the blank ({blank})" if blank is not None else "")
    if not isinstance(value, list) or not all(_is_int(v) for v in value):
        fail(where, want, repr(value))
    blanks = [v for v in value if v == blank]
    if blanks:
        fail(where, want, f"{value!r}, where {blank} is the blank (the blank is no label)")
    bad = [v for v in value if v < lo or v > hi]
    if bad:
        fail(where, want, f"{value!r} (bad: {bad})")
    return [int(v) for v in value]


def table(value, where: str, *, width: int | None) -> np.ndarray:
    """``(rows, width)`` float64 from a rectangular list of lists of numbers (NaN/inf allowed)."""
    want = "a rectangular table (a list of rows of numbers" + (
        f", {width} per row)" if width is not None else ")")
    if not isinstance(value, list) or not all(isinstance(r, list) for r in value):
        fail(where, want, repr(value)[:80])
    lengths = sorted({len(r) for r in value})
    if len(lengths) > 1 or (width is not None and value and lengths != [width]):
        fail(where, want, f"row lengths {lengths}")
    if not all(isinstance(x, (int, float)) and not isinstance(x, bool) for r in value for x in r):
        fail(where, want, "a non-number in a row")
    return np.asarray(value, dtype=np.float64).reshape(len(value), lengths[0] if value else (width or 0))


def array(value, where: str, *, integer: bool) -> np.ndarray:
    """A number, or a rectangular nested list of them (any rank), as int64 (``integer``: ints
    only) or float64 (NaN/inf allowed); ragged, non-numeric or out-of-range data is refused
    before NumPy sees it, so nothing is cast, truncated or wrapped."""
    kind = "integers" if integer else "numbers"
    want = f"a number or a rectangular nested list of {kind}"

    def ok(x) -> bool:
        if integer:
            return _is_int(x) and -2**63 <= x < 2**63
        return isinstance(x, (int, float)) and not isinstance(x, bool) and (
            isinstance(x, float) or abs(x) < 2**1023)

    def shape(x, depth: int = 0) -> tuple:
        if isinstance(x, list):
            if depth > 32:
                fail(where, want, "lists nested more than 32 deep")
            shapes = {shape(v, depth + 1) for v in x}
            if len(shapes) > 1:
                fail(where, want, f"rows of different shapes {sorted(shapes, key=len)[:3]}")
            return (len(x), *(shapes.pop() if shapes else ()))
        if not ok(x):
            fail(where, want, repr(x)[:80])
        return ()

    shape(value)
    return np.asarray(value, dtype=np.int64 if integer else np.float64)


def choice(value, where: str, options) -> str:
    """One of ``options`` (strings)."""
    if not isinstance(value, str) or value not in options:
        fail(where, f"one of {', '.join(options)}", repr(value))
    return value


def flag(value, where: str) -> bool:
    """A boolean (true/false), not 0/1 or a string."""
    if not isinstance(value, bool):
        fail(where, "true or false", repr(value))
    return value


def keys(value: dict, where: str, allowed) -> None:
    """Refuse a key of the table ``value`` that is not ``allowed``: a misspelt key is an error
    offering the closest allowed one, never a setting silently dropped."""
    unknown = sorted(str(k) for k in value if k not in allowed)
    if unknown:
        near = [m for k in unknown for m in difflib.get_close_matches(k, allowed, n=1)]
        hint = f" (did you mean {', '.join(map(repr, near))}?)" if near else ""
        fail(where, f"keys among {', '.join(sorted(allowed))}",
             ", ".join(map(repr, unknown)) + hint)
