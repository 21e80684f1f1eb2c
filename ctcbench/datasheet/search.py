"""The largest size at which a backend is still right: doubling, then bisection.

``probe(p) -> Outcome`` runs the backend at size ``p``; ``largest_correct`` doubles ``p`` from
the axis' start until a probe fails (or the cap, the memory limit or the time runs out), then
bisects between the last right size and the first failing one down to one step. It assumes
one cliff: a backend right again past its first failure is not looked for.
"""
from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass, field
from enum import StrEnum


class Clock:
    """``time.monotonic()`` that stands still inside ``paused()``: the budget counts probing,
    not a worker's restart (a framework's import and first compilation) after a crash."""

    def __init__(self):
        self.stopped = 0.0

    def now(self) -> float:
        return time.monotonic() - self.stopped

    @contextlib.contextmanager
    def paused(self):
        start = time.monotonic()
        try:
            yield
        finally:
            self.stopped += time.monotonic() - start


class Status(StrEnum):
    """What one limits or precision probe found: right, or how it failed; each with the mark
    and colour the limits plot draws it with. Written to the sheet's files as the plain word."""

    def __new__(cls, value: str, marker: str, color: str):
        member = str.__new__(cls, value)
        member._value_ = value
        member.marker, member.color = marker, color
        return member

    OK = "ok", "o", "#2a9d4b"
    WRONG = "wrong", "X", "#c0392b"  # an answer, but not the oracle's
    INVALID = "invalid", "X", "#8e44ad"  # an answer that breaks an invariant of every answer
    REFUSES = "refuses", "s", "#e67e22"  # raised (the backend's own error, or unsupported)
    CRASHES = "crashes", "*", "#000000"  # the worker died
    HANGS = "hangs", "v", "#7f8c8d"  # no answer within the timeout
    OUT_OF_MEMORY = "out of memory", "D", "#2c3e50"


class Cliff(StrEnum):
    """What the search of one axis came to (a limit row's ``status``)."""

    FOUND = "found"  # a size it fails at (``failing``)
    NOT_REACHED = "not reached"  # right at every size tried (the cap, memory or time stopped it)
    NOT_SEARCHED = "not searched"  # no size tried: the first did not fit, or no time was left


@dataclass
class Outcome:
    """What one probe found: a :class:`Status`, a one-line ``detail``, and the errors
    against the oracle where there was an answer."""

    status: Status
    detail: str = ""
    loss_err: float | None = None
    grad_err: float | None = None
    seconds: float | None = None

    @property
    def ok(self) -> bool:
        return self.status == Status.OK


@dataclass
class Limit:
    """An axis' result: right up to ``correct`` (None: not even at the start), first failing at
    ``failing`` with ``past`` (None: no failure found, so right "up to at least" ``correct``),
    and ``stopped``, why the search ended without a failure (the cap, memory, the budget)."""

    axis: str
    correct: int | None
    failing: int | None = None
    past: Outcome | None = None
    stopped: str | None = None
    probes: list[tuple[int, Outcome]] = field(default_factory=list)
    sharp: bool = True  # False: past a "wrong" limit, other draws were right (a drift, no cliff)

    @property
    def cliff(self) -> Cliff:
        """Whether the search found a failing size, or tried none."""
        if self.failing is not None:
            return Cliff.FOUND
        return Cliff.NOT_REACHED if self.probes else Cliff.NOT_SEARCHED

    @property
    def exact(self) -> bool:
        """The cliff is found to one step (or is the smallest size itself)."""
        return self.failing is not None and (self.correct is None
                                             or self.failing == self.correct + 1)


def largest_correct(axis: str, probe, *, start: int, cap: int, deadline: float,
                    bisect_until: float | None = None, fits=lambda p: True,
                    clock=time.monotonic) -> Limit:
    """Search ``axis`` with ``probe``; ``fits(p)`` is False for a size that must not be run
    (memory); ``deadline`` a ``time.monotonic()`` after which no new size is doubled to, and
    ``bisect_until`` (default ``deadline``) after which a bisection under way stops: a
    cliff once found is worth finding to the step. Both are times of ``clock``."""
    bisect_until = deadline if bisect_until is None else max(deadline, bisect_until)
    limit = Limit(axis, None)

    def run(p: int) -> Outcome:
        outcome = probe(p)
        limit.probes.append((p, outcome))
        return outcome

    p, good, bad, past = start, None, None, None
    while True:  # doubling
        if not fits(p):
            limit.stopped = f"the memory limit (size {p} would not fit)"
            break
        if clock() > deadline:
            limit.stopped = "the time budget"
            break
        outcome = run(p)
        if not outcome.ok:
            bad, past = p, outcome
            break
        good = p
        if p >= cap:
            limit.stopped = f"the largest size searched ({cap})"
            break
        p = min(2 * p, cap)
    while bad is not None and good is not None and bad - good > 1:  # bisection
        if clock() > bisect_until:
            limit.stopped = "the time budget (bisection unfinished)"
            break
        mid = (good + bad) // 2
        outcome = run(mid)
        if outcome.ok:
            good = mid
        else:
            bad, past = mid, outcome
    limit.correct, limit.failing, limit.past = good, bad, past
    if bad is not None and limit.stopped and "bisection" not in limit.stopped:
        limit.stopped = None
    return limit
