"""The one timing loop, run where the implementation runs: in-process for ordinary backends,
inside the worker process for isolated ones (``ctcbench.runtime.worker``'s ``bench`` request).

Only the call itself is timed, with ``time.perf_counter`` around it: no problem is built,
sent or checked inside the clock. The first call (imports, JIT compilation, allocator warm-up)
is timed on its own and never mixed into the steady-state times.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

MIN_MEASUREMENT_S = 0.05  # a measurement loops a fast call until it takes about this long
MAX_CALLS_PER_MEASUREMENT = 100


@dataclass
class CallTimes:
    """What :func:`time_calls` measured.

    ``first_call_s``: the first call of ``warmup`` (``None`` without warm-up);
    ``number``: calls per measurement; ``times_s``: seconds per call, one per measurement.
    """

    first_call_s: float | None = None
    number: int = 1
    times_s: list[float] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


def calls_per_measurement(seconds: float) -> int:
    """How many back-to-back calls make one measurement of about ``MIN_MEASUREMENT_S``."""
    return int(min(max(math.ceil(MIN_MEASUREMENT_S / max(seconds, 1e-6)), 1),
                   MAX_CALLS_PER_MEASUREMENT))


def timed(call: Callable[[], object], number: int = 1) -> float:
    """Seconds per call over ``number`` back-to-back calls of ``call()``."""
    t0 = time.perf_counter()
    for _ in range(number):
        call()
    return (time.perf_counter() - t0) / number


def time_calls(call: Callable[[], object], *, warmup: int = 1, repeat: int = 1,
               number: int | None = None) -> CallTimes:
    """``warmup`` untimed-for-the-result calls (the first one timed as ``first_call_s``),
    then, when ``number`` is None, one calibration call that sets it, then ``repeat``
    measurements of ``number`` calls each."""
    if warmup < 0 or repeat < 0 or (number is not None and number < 1):
        raise ValueError(f"time_calls: expected warmup >= 0, repeat >= 0, number >= 1 or None, "
                         f"got warmup={warmup}, repeat={repeat}, number={number}")
    out = CallTimes()
    for i in range(warmup):
        if i == 0:
            out.first_call_s = timed(call)
        else:
            call()
    out.number = number if number is not None else calls_per_measurement(timed(call))
    out.times_s = [timed(call, out.number) for _ in range(repeat)]
    return out
