"""The one timing loop, run where the implementation runs: in-process for ordinary backends,
inside the worker process for isolated ones (``ctcbench.runtime.worker``'s ``bench`` request).

Only the call itself is timed, with ``time.perf_counter`` around it: no problem is built,
sent or checked inside the clock. The first call (imports, JIT compilation, allocator warm-up)
is timed on its own and never mixed into the steady-state times. Between two timed calls
nothing runs (``"nothing"``, back to back) or, as in a training step, a model's work
(``"model-step"``, :func:`model_step`), untimed: a call that allocates fresh memory each time
pays for it only there (docs/bench.md, "Between calls").
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

import numpy as np

MIN_MEASUREMENT_S = 0.05  # a measurement loops a fast call until it takes about this long
MAX_CALLS_PER_MEASUREMENT = 100
BETWEEN_CALLS = ("nothing", "model-step")  # what runs between two timed calls
MODEL_STEP_ARRAYS = 3  # torch's log_softmax + ctc_loss + backward touch ~3x the logits' bytes
MODEL_STEP_MIN_BYTES = 32 << 20  # each at least a last-level cache (32 MiB on the CPUs here)
MAX_CALLS_BETWEEN = 10  # calls per measurement with work between them, each timed apart


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


def model_step(nbytes: int) -> Callable[[], None]:
    """What ``"model-step"`` runs between two timed calls: ``MODEL_STEP_ARRAYS`` arrays of
    ``nbytes`` (the logits'), or of ``MODEL_STEP_MIN_BYTES`` if more, allocated, written and
    freed, as a model's forward and backward passes do around the loss (torch's CPU
    ``log_softmax`` + ``ctc_loss`` + ``backward`` at T=1000 N=8 C=5000 float64 first-touches
    240,000 pages of 4 KiB a call, 3x its logits' 320 MB; a model's activations outgrow the
    caches at any size). The call after it finds the caches cold and memory just given back."""
    count = max(nbytes, MODEL_STEP_MIN_BYTES) // 8

    def step():
        arrays = [np.empty(count) for _ in range(MODEL_STEP_ARRAYS)]  # each (count,) float64
        for a in arrays:
            a.fill(1.0)
    return step


def between_calls(mode: str, nbytes: int) -> Callable[[], None] | None:
    """The untimed work between two timed calls for ``mode`` (one of ``BETWEEN_CALLS``), of a
    problem whose logits take ``nbytes``; ``None`` for back to back."""
    if mode not in BETWEEN_CALLS:
        raise ValueError(f"between_calls: expected one of {', '.join(BETWEEN_CALLS)}, "
                         f"got {mode!r}")
    return model_step(nbytes) if mode == "model-step" else None


def timed(call: Callable[[], object], number: int = 1,
          between: Callable[[], None] | None = None) -> float:
    """Seconds per call over ``number`` calls of ``call()``: back to back, or with
    ``between()`` run before each, outside the clock."""
    if between is None:
        t0 = time.perf_counter()
        for _ in range(number):
            call()
        return (time.perf_counter() - t0) / number
    total = 0.0
    for _ in range(number):
        between()
        t0 = time.perf_counter()
        call()
        total += time.perf_counter() - t0
    return total / number


def time_calls(call: Callable[[], object], *, warmup: int = 1, repeat: int = 1,
               number: int | None = None,
               between: Callable[[], None] | None = None) -> CallTimes:
    """``warmup`` untimed-for-the-result calls (the first one timed as ``first_call_s``),
    then, when ``number`` is None, one calibration call that sets it, then ``repeat``
    measurements of ``number`` calls each (``between``: see :func:`timed`)."""
    if warmup < 0 or repeat < 0 or (number is not None and number < 1):
        raise ValueError(f"time_calls: expected warmup >= 0, repeat >= 0, number >= 1 or None, "
                         f"got warmup={warmup}, repeat={repeat}, number={number}")
    out = CallTimes()
    for i in range(warmup):
        if i == 0:
            out.first_call_s = timed(call)
        else:
            call()
    out.number = (number if number is not None
                  else calls_per_measurement(timed(call, between=between)))
    if between is not None and number is None:  # each call is timed apart: no need to loop
        out.number = min(out.number, MAX_CALLS_BETWEEN)
    out.times_s = [timed(call, out.number, between) for _ in range(repeat)]
    return out
