"""Jinja filters: numbers for people. A missing or not-applicable value (None, NaN, "") is an
empty string, so tables show an empty cell, never ``None`` or ``nan``."""
from __future__ import annotations

import math

from ctcbench.environment import cpu_text


def missing(x) -> bool:
    """True for None, NaN, "" and the strings JSON sidecars use for them."""
    if x is None or (isinstance(x, str) and x.strip().lower() in ("", "nan", "none", "null")):
        return True
    return isinstance(x, float) and math.isnan(x)


def number(x) -> float | None:
    """``x`` as a float, or None when missing or not a number ("inf" reads as inf)."""
    if missing(x) or isinstance(x, bool):
        return None
    try:
        return float(x)
    except (TypeError, ValueError):
        return None


def num(x, spec: str = ".4g") -> str:
    """``format(x, spec)``; '' when missing; infinities as ∞."""
    v = number(x)
    if v is None:
        return "" if missing(x) else str(x)
    if math.isinf(v):
        return "∞" if v > 0 else "−∞"
    if spec.endswith("d"):
        return format(int(round(v)), spec)
    return format(v, spec)


def ms(seconds) -> str:
    """Seconds as milliseconds with 3 significant digits ('' when missing)."""
    v = number(seconds)
    if v is None:
        return ""
    v *= 1e3
    return f"{v:.0f}" if v >= 100 else f"{v:.3g}"


def sci(x) -> str:
    """A small error as 1.2e-07; 0 as 0."""
    v = number(x)
    if v is None:
        return ""
    return "0" if v == 0 else num(v, ".2g" if 1e-3 <= abs(v) < 1e4 else ".1e")


def sig(x) -> str:
    """3 significant digits without an exponent: 0.0312, 4.56, 1,610."""
    v = number(x)
    if v is None or math.isinf(v):
        return num(x)
    return f"{v:,.0f}" if abs(v) >= 100 else f"{v:.3g}"


def ratio(x) -> str:
    """A ratio as 1.23×."""
    v = number(x)
    if v is None:
        return ""
    return f"{v:.2f}×" if 0.01 <= abs(v) < 100 else f"{sig(v)}×"


def sort_key(x) -> str:
    """The ``data-v`` a sortable table cell sorts by: the raw number, or '' (sorts last)."""
    v = number(x)
    return "" if v is None else repr(v)


FILTERS = {"num": num, "ms": ms, "sci": sci, "ratio": ratio, "sig": sig, "sort_key": sort_key,
           "cpu_text": cpu_text}  # cpu_text: an environment dict's CPU in one line
