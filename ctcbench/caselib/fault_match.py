"""Which common fault explains a CTC function's wrong numbers: its per-sample loss and
gradient held against the models of :mod:`ctcbench.caselib.faults`, within the tolerance
the judge used.

A sample *fails* when the function's loss or gradient is not within tolerance of the correct
model. A fault *explains* a failing sample when one of its forms changes the answer there and
reproduces the function's: its loss, where the fault changes the loss (a hand-written
gradient may follow the loss's fault or not), else its gradient, with the loss right. A
fault is *contradicted* by a sample the function got right although the fault would have
changed its answer by several tolerances. :func:`name_causes` names the faults that explain
the failing samples and are never contradicted.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ctcbench.caselib.faults import CORRECT, FAULTS, Evaluator, Fault, Result

CLEAR = 4.0  # a fault that would change a passing sample's answer by this many tolerances
# (and not just by rounding) is contradicted by it
MAX_SAMPLES = 24  # samples examined per problem: the failing ones first
MAX_CELLS = 200_000  # T_n x S beyond this, a sample is not examined (its recursions cost)
MAJORITY = 2 / 3  # the named causes must explain at least this share of the failing samples


@dataclass
class SampleVerdict:
    """One sample: whether the function failed it, the faults (with the form) that explain
    it, and those it contradicts."""

    sample: int
    failing: bool
    explained: dict[str, str] = field(default_factory=dict)
    contradicted: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Cause:
    """A named fault: how many failing samples it explains, of how many, and by which form."""

    fault: Fault
    form: str
    explained: int
    failing: int

    @property
    def name(self) -> str:
        return self.fault.name

    def line(self) -> str:
        """``"repeated labels: your loss lets ... (matches on 215 of 215 failing samples)"``"""
        return (f"{self.fault.name}: {self.fault.sentence(self.form)} (matches on "
                f"{self.explained} of {self.failing} failing samples)")


def _loss_close(got: float, want: float, tol, factor: float = 1.0) -> bool:
    """Within ``factor`` tolerances; NaN only as NaN, an infinity only as the same one."""
    if np.isnan(got) or np.isnan(want):
        return bool(np.isnan(got) and np.isnan(want))
    if np.isinf(got) or np.isinf(want):
        return got == want
    return abs(got - want) <= factor * (tol.loss_atol + tol.loss_rtol * abs(want))


def _grad_close(got: np.ndarray, want: np.ndarray, tol, factor: float = 1.0) -> bool:
    """``(T, C)`` entry by entry: NaN where the other is NaN, finite within tolerance."""
    nan = np.isnan(want)
    if not np.array_equal(np.isnan(got), nan):
        return False
    g, w = got[~nan], want[~nan]
    inf = np.isinf(w) | np.isinf(g)
    if not np.array_equal(g[inf], w[inf]):
        return False
    g, w = g[~inf], w[~inf]
    return bool((np.abs(g - w) <= factor * tol.grad_allowed(w)).all())


def _verdict(n, got_loss, got_grad, correct: Result, tol, weight, evaluator, sample):
    """What sample ``n`` says of each fault that can show on it."""
    loss_bad = not _loss_close(got_loss, correct.loss, tol)
    grad_bad = not _grad_close(got_grad, weight * correct.grad, tol)
    verdict = SampleVerdict(n, loss_bad or grad_bad)
    for fault in FAULTS:
        if not fault.shows(sample):
            continue
        results = evaluator.fault_results(fault, n)
        if not verdict.failing:
            if all(_clearly_differs(res, correct, tol, weight) for _, res in results):
                verdict.contradicted.append(fault.key)
            continue
        for form, res in results:
            if _explains(got_loss, got_grad, res, correct, tol, weight, loss_bad):
                verdict.explained[fault.key] = form
                break
    return verdict


def _explains(got_loss, got_grad, res: Result, correct: Result, tol, weight, loss_bad) -> bool:
    """A fault's answer ``res`` reproduces the function's: its loss where the fault changes
    the loss, else (a fault of the gradient alone) a right loss and its gradient."""
    if not _loss_close(res.loss, correct.loss, tol):
        return _loss_close(got_loss, res.loss, tol)
    return (not loss_bad and res.grad is not None
            and not _grad_close(weight * res.grad, weight * correct.grad, tol)
            and _grad_close(got_grad, weight * res.grad, tol))


def _clearly_differs(res: Result, correct: Result, tol, weight: float = 1.0) -> bool:
    """The fault's answer is more than ``CLEAR`` tolerances from the correct one: in the
    loss where the loss differs at all, else in the gradient."""
    if not _loss_close(res.loss, correct.loss, tol):
        return not _loss_close(res.loss, correct.loss, tol, CLEAR)
    return res.grad is not None and not _grad_close(weight * res.grad, weight * correct.grad,
                                                    tol, CLEAR)


def _cells(problem, n: int) -> int:
    return max(int(problem.input_lengths[n]), 1) * (2 * problem.shape[3] + 1)


def judge_samples(problem, loss, grad, tol, *, weights=None, samples=None, inputs=None,
                  limit: int = MAX_SAMPLES) -> list[SampleVerdict]:
    """The verdicts on a function's answer for ``problem``: ``loss (N,)``, ``grad (T, N, C)``
    (of the loss weighted by ``weights (N,)``, default 1), each held against the correct
    model and every fault, within ``tol`` (a :class:`ctcbench.caselib.judge.Tolerance`).

    ``samples (N,)`` bool: the samples to look at (default all); up to ``limit`` of them,
    the failing ones first, each of at most ``MAX_CELLS`` recursion cells. ``inputs``: how
    the function saw the problem (:func:`ctcbench.caselib.faults.inputs_of`)."""
    T, N, C, _ = problem.shape
    loss = np.asarray(loss, np.float64)
    grad = np.asarray(grad, np.float64)
    w = np.ones(N) if weights is None else np.asarray(weights, np.float64)
    chosen = np.ones(N, bool) if samples is None else np.asarray(samples, bool)
    ev = Evaluator(problem, inputs)
    small = [n for n in range(N) if chosen[n] and _cells(problem, n) <= MAX_CELLS]
    correct = {n: ev.result(CORRECT, n) for n in small}
    failing = [n for n in small
               if not (_loss_close(loss[n], correct[n].loss, tol)
                       and _grad_close(grad[:, n], w[n] * correct[n].grad, tol))]
    order = failing + [n for n in small if n not in failing]
    return [_verdict(n, loss[n], grad[:, n], correct[n], tol, w[n], ev, ev.sample(n))
            for n in order[:limit]]


def contradicts(problem, fault: Fault, tol, *, samples=None, inputs=None,
                limit: int = MAX_SAMPLES) -> int:
    """How many samples of ``problem`` (one the function got right, ``samples (N,)`` bool:
    those checked) ``fault`` would have changed by more than ``CLEAR`` tolerances."""
    T, N, C, _ = problem.shape
    chosen = np.ones(N, bool) if samples is None else np.asarray(samples, bool)
    ev = Evaluator(problem, inputs)
    found = looked = 0
    for n in range(N):
        if not chosen[n] or _cells(problem, n) > MAX_CELLS or not fault.shows(ev.sample(n)):
            continue
        if looked == limit:
            break
        looked += 1
        correct = ev.result(CORRECT, n)
        found += all(_clearly_differs(res, correct, tol) for _, res in ev.fault_results(fault, n))
    return found


def name_causes(failing: list, explained: dict[str, dict], contradicted: dict[str, int],
                ) -> list[Cause]:
    """The causes to name: ``failing`` the ids of the failing samples, ``explained`` fault
    key -> ``{id: form}`` of those it explains, ``contradicted`` fault key -> how many
    samples the function got right where the fault would have shown.

    Faults never contradicted are taken greedily, the one explaining most of the samples
    not yet explained first, while one explains any; they are named when together they
    explain a clear majority (``MAJORITY``) of the failing samples, else none is."""
    failing = list(dict.fromkeys(failing))
    left = set(failing)
    chosen = []
    pool = {k: v for k, v in explained.items() if v and not contradicted.get(k)}
    while left and pool:
        key = max(pool, key=lambda k: (len(left & set(pool[k])), len(pool[k]), -_rank(k)))
        if not left & set(pool[key]):
            break
        left -= set(pool[key])
        forms = list(pool.pop(key).values())
        form = max(dict.fromkeys(forms), key=forms.count)
        chosen.append(Cause(_fault(key), form, len(explained[key]), len(failing)))
    if not failing or len(failing) - len(left) < MAJORITY * len(failing):
        return []
    return chosen


def _rank(key: str) -> int:
    return [f.key for f in FAULTS].index(key)


def _fault(key: str) -> Fault:
    return FAULTS[_rank(key)]
