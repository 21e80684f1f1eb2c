"""A ``--function``'s cases predicted before they run, so a slow function costs seconds.

A user's function runs in its worker with a per-call timeout (120 s by default), and a call
past it costs the whole timeout and a restart of the worker. So compare runs the cheapest
cases first, fits each function's calls so far (:class:`ctcbench.runtime.cost.CostModel`),
and skips a case whose calls (one per variant, and its checks' own: finite differences,
repeats) are predicted past ``limit`` seconds in all, the prediction and its growth in the
row's reason; a case at least as large in every measure as one that timed out is skipped
too. What that spared is said once, at the end (``summary["slow"]``). Built-in backends are
not predicted: every case runs.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctcbench.compare.extra import extra_calls
from ctcbench.runtime.cost import CostModel, Prediction, seconds_said as _secs, work
from ctcbench.runtime.status import CHECKED, Status

OPTION = "--predict-limit"


def cheapest_first(jobs, preps) -> list:
    """``jobs`` ((case, dtype) pairs) ordered by their problems' work under the fastest
    growth the cost model names (:func:`_size`), least first: the cases longest in frames,
    where a slow backward shows, run last, once the calls before them tell how it grows."""
    def size(job):
        prep = preps.get((job[0].name, job[1]))
        return sum(_size(p) for p in prep.problems) if prep is not None else 0.0
    return sorted(jobs, key=size)


def _size(problem) -> float:
    """Frames squared times (states + classes), over the samples."""
    C = problem.shape[2]
    frames = np.asarray(problem.input_lengths, np.float64)
    return float((frames ** 2 * (2.0 * np.asarray(problem.target_lengths) + 1 + C)).sum())


class SlowCases:
    """The calls of each of ``functions`` (backend names), and the cases skipped as slow.
    ``limit``: seconds a case may be predicted to take, all its calls (None: each backend's
    per-call timeout; 0: every case runs); ``say``: told once per function when its first
    case is skipped."""

    def __init__(self, functions, limit: float | None, say=print):
        self.models = {name: CostModel() for name in functions}
        self.limit, self.say = limit, say
        self.skipped: dict[str, list] = {name: [] for name in functions}  # (case,
        # CasePrediction, or None when skipped after a timeout)
        self.timed_out: dict[str, list] = {name: [] for name in functions}  # (case, work)
        self.limits: dict[str, tuple[float, float]] = {}  # name -> (limit, per-call timeout)

    def _limit(self, backend) -> float:
        return backend.traits.timeout_s if self.limit is None else self.limit

    def seen(self, backend, prep, row: dict) -> None:
        """What a row of ``backend`` on ``prep`` tells: its seconds, or that it timed out."""
        name = backend if isinstance(backend, str) else backend.name
        if name not in self.models or not prep.problems:
            return
        if row.get("status") in CHECKED and row.get("time_s") is not None:
            self.models[name].add(prep.problems, row["time_s"])
        elif row.get("status") == Status.TIMEOUT:
            most = np.max([work(p) for p in prep.problems], axis=0)
            self.timed_out[name].append((f"{prep.case.name} ({prep.dtype})", most))

    def skip(self, backend, prep) -> dict | None:
        """The ``skipped`` row of a case predicted past the limit, or None: run it."""
        limit = self._limit(backend)
        if backend.name not in self.models or not limit or not prep.problems:
            return None
        self.limits[backend.name] = (limit, backend.traits.timeout_s)
        why = self._after_timeout(backend.name, prep)
        if why is None:
            guess = self._predict(backend.name, prep, backend.traits.timeout_s)
            if guess is None or guess.seconds <= limit:
                return None
            self.skipped[backend.name].append((prep.case.name, guess))
            why = f"{guess}, past the {limit:g} s a case may take"
        else:
            self.skipped[backend.name].append((prep.case.name, None))
        if len(self.skipped[backend.name]) == 1:
            self.say(f"{backend.name}: skipping its cases predicted past {limit:g} s from "
                     f"its calls so far ({OPTION} 0 runs them)")
        return {"backend": backend.name, "case": prep.case.name, "family": prep.case.family,
                "dtype": prep.dtype, "device": backend.traits.device,
                "oracle": prep.answers[0].source if prep.answers else None,
                "variants": len(prep.variants), "status": Status.SKIPPED,
                "reason": f"predicted slow: {why} ({OPTION} 0 runs it)"}

    def _predict(self, name: str, prep, timeout: float) -> CasePrediction | None:
        """Every call the case makes: one per variant, and its checks' on the first problem."""
        guesses = [self.models[name].predict(p) for p in prep.problems]
        if any(g is None for g in guesses):
            return None
        calls = guesses + [guesses[0]] * extra_calls(prep.case.expect)
        return CasePrediction(max(calls, key=lambda g: g.seconds),
                              sum(g.seconds for g in calls), len(calls),
                              sum(min(g.seconds, timeout) for g in calls),
                              sum(g.seconds > timeout for g in calls))

    def _after_timeout(self, name: str, prep) -> str | None:
        """Why ``prep`` is no cheaper than a case that timed out, or None."""
        mine = [work(p) for p in prep.problems]
        for case, most in self.timed_out[name]:
            if any((w >= most).all() for w in mine):
                return f"no smaller in frames, labels or batch than {case}, which timed out"
        return None

    def lines(self) -> list[str]:
        """One line per function with rows skipped: which cases, the growth, and what running
        them would have cost (a call past the per-call timeout: the timeout and a restart of
        the worker, each time; a case no smaller than one that timed out counts as one)."""
        out = []
        for name, skipped in self.skipped.items():
            if not skipped:
                continue
            limit, timeout = self.limits[name]
            seconds = sum(g.capped_s if g else timeout for _, g in skipped)
            past = sum(g.past if g else 1 for _, g in skipped)
            guesses = [g.call for _, g in skipped if g is not None]
            worst = max(guesses, key=lambda g: g.seconds) if guesses else None
            out.append(
                f"predicted slow: {name}: {len(skipped)} row{'s' if len(skipped) != 1 else ''}"
                f" skipped ({', '.join(dict.fromkeys(c for c, _ in skipped))}), each "
                f"predicted past {limit:g} s"
                + (f"; {worst.growth}: up to {_secs(worst.seconds)} a call, at T={worst.T}, "
                   f"from {_secs(worst.seen_s)} at T={worst.seen_T}" if worst else "")
                + f"; running them would have cost about {_secs(seconds)}"
                + (f", {past} call{'s' if past != 1 else ''} past the {timeout:g} s timeout, "
                   f"each a timeout and a restart of the worker" if past else "")
                + f"; {OPTION} 0 runs them")
        return out


@dataclass(frozen=True)
class CasePrediction:
    """A case's calls predicted: the slowest ``call``, the ``seconds`` of them all, how many
    ``calls``; and, each call stopped at the per-call timeout, their seconds (``capped_s``)
    and how many it would stop (``past``)."""

    call: Prediction
    seconds: float
    calls: int
    capped_s: float
    past: int

    def __str__(self) -> str:
        return str(self.call) + (f", {_secs(self.seconds)} for its {self.calls} calls"
                                 if self.calls > 1 else "")
