"""The ``[case.expect]`` table of a case file: which keys it may hold and what each must be.

Format 1 keys: ``oracle``, ``loss`` and ``grad`` (published values). Format 2 adds::

    error = { type = "ValueError", match = "regex" }   # building the problem must raise this
    reduction = "mean" | "sum" | "none"                # also check the reduced loss and its grad
    zero_infinity = true                               # ... with infinite losses zeroed
    deterministic = true                               # two calls give bit-identical results
    calls = 5                                          # ... or each of this many calls does
    samples = [0, 2]                                   # check only these samples
    [case.expect.finite_difference]                    # central differences of the backend's loss
    coords = [[t, n, c], ...]  or  count = 8           # chosen or seeded random valid coordinates
    step = 1e-5, seed = 0, atol = 1e-6, rtol = 1e-4    # defaults (FD_DEFAULTS)

``oracle = "finite_difference"`` is the finite-difference check with its defaults, with the
loss checked against the reference. The checks themselves are in ``ctcbench.compare.extra``.
"""
from __future__ import annotations

import difflib
import math
import re

from ctcbench.core.reduction import REDUCTIONS
from ctcbench.errors import expect as _expect  # `expect` is the table checked here

FD_DEFAULTS = {"count": 8, "step": 1e-5, "seed": 0, "atol": 1e-6, "rtol": 1e-4}
_KEYS = {"oracle", "loss", "grad", "error", "reduction", "zero_infinity", "deterministic",
         "calls", "samples", "finite_difference"}
MAX_CALLS = 100  # the most calls a determinism check may ask for


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and not math.isnan(x)


def check_expect(expect: dict, where: str, *, fmt: int = 1) -> None:
    """Validate ``expect`` (a case's ``[case.expect]``); errors name ``where.KEY``. Format 1
    files may carry extra keys (notes such as published alpha tables); format 2 may not."""
    unknown = sorted(set(expect) - _KEYS)
    _expect(fmt == 1 or not unknown, where, f"only the keys {', '.join(sorted(_KEYS))}", unknown)
    for key in unknown:  # format 1's notes, but never a misspelt key read as one
        near = difflib.get_close_matches(key, _KEYS, n=1)
        _expect(not near, f"{where}.{key}", "a note beside the keys " + ", ".join(sorted(_KEYS)),
                f"a key a letter or two from {near[0] if near else ''!r}")
    if "error" in expect:
        err = expect["error"]
        _expect(isinstance(err, dict) and set(err) <= {"type", "match"}
                and isinstance(err.get("type"), str) and isinstance(err.get("match", ""), str),
                f"{where}.error", "a table { type = \"ValueError\", match = \"regex\" }", repr(err))
        try:
            re.compile(err.get("match", ""))
        except re.error as exc:
            raise ValueError(f"{where}.error.match: expected a regular expression, got "
                             f"{err['match']!r} ({exc})") from None
        others = sorted(set(expect) - {"error", "oracle"})
        _expect(not others, where, "nothing but error (a case that must raise has no answer)",
                others)
    if "reduction" in expect:
        _expect(expect["reduction"] in REDUCTIONS, f"{where}.reduction",
                f"one of {', '.join(REDUCTIONS)}", repr(expect["reduction"]))
    for key in ("zero_infinity", "deterministic"):
        _expect(isinstance(expect.get(key, False), bool), f"{where}.{key}", "true or false",
                repr(expect.get(key)))
    if "calls" in expect:
        c = expect["calls"]
        _expect(_is_int(c) and 2 <= c <= MAX_CALLS and expect.get("deterministic") is True,
                f"{where}.calls", f"a whole number of calls in [2, {MAX_CALLS}], with "
                f"deterministic = true", repr(c))
    if "samples" in expect:
        s = expect["samples"]
        _expect(isinstance(s, list) and s and all(_is_int(i) and i >= 0 for i in s)
                and len(set(s)) == len(s), f"{where}.samples",
                "a non-empty list of distinct sample indices", repr(s))
    if "finite_difference" in expect:
        fd = expect["finite_difference"]
        _expect(isinstance(fd, dict) and set(fd) <= set(FD_DEFAULTS) | {"coords"},
                f"{where}.finite_difference", f"a table with keys from coords, "
                f"{', '.join(FD_DEFAULTS)}", repr(fd))
        coords = fd.get("coords", [[0, 0, 0]])
        _expect(isinstance(coords, list) and coords and all(
            isinstance(c, list) and len(c) == 3 and all(_is_int(i) and i >= 0 for i in c)
            for c in coords), f"{where}.finite_difference.coords",
            "a non-empty list of [t, n, c] index triples", repr(coords))
        for key in ("step", "atol", "rtol"):
            _expect(_number(fd.get(key, 1.0)) and fd.get(key, 1.0) >= 0 and
                    (key != "step" or fd.get(key, 1.0) > 0), f"{where}.finite_difference.{key}",
                    "a non-negative number (step: positive)", repr(fd.get(key)))
        for key in ("count", "seed"):
            _expect(_is_int(fd.get(key, 1)) and fd.get(key, 1) >= (key == "count"),
                    f"{where}.finite_difference.{key}", "a non-negative int (count: positive)",
                    repr(fd.get(key)))


def finite_difference_spec(expect: dict) -> dict | None:
    """The finite-difference check the case asks for, defaults filled in; None if none."""
    if "finite_difference" not in expect and expect.get("oracle") != "finite_difference":
        return None
    return {**FD_DEFAULTS, **expect.get("finite_difference", {})}
