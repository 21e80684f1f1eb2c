"""Is a result within tolerance of the expected one: the one comparison ``compare`` and
``fuzz`` share (tolerances per dtype, the same infinity as agreement, NaN as the worst error)."""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ctcbench.core.invariants import broken_invariants, broken_loss_invariants


@dataclass(frozen=True)
class Tolerance:
    """Pass when ``|got - want| <= atol + rtol * |want|``, for the loss and for each gradient
    entry (``grad_rtol`` is 0 unless a case sets it)."""

    loss_rtol: float
    loss_atol: float
    grad_atol: float
    grad_rtol: float = 0.0

    def loss_ok(self, err: float, want: float) -> bool:
        return err <= self.loss_atol + self.loss_rtol * abs(want)

    def grad_allowed(self, want):
        """Allowed ``|got - want|`` per gradient entry (array like ``want``)."""
        return self.grad_atol + self.grad_rtol * abs(want)


# Round-off of a log-space forward-backward computed in each dtype, on problems of a few
# hundred frames. Cases with other needs (published values to 6 digits, T in the thousands)
# say so in their own [case.tolerance].
DEFAULT_TOLERANCES = {
    "float64": Tolerance(loss_rtol=1e-9, loss_atol=1e-9, grad_atol=1e-9),
    "float32": Tolerance(loss_rtol=1e-5, loss_atol=1e-4, grad_atol=1e-4),
    "float16": Tolerance(loss_rtol=1e-2, loss_atol=2e-2, grad_atol=2e-2),
    "bfloat16": Tolerance(loss_rtol=5e-2, loss_atol=1e-1, grad_atol=1e-1),
}


def loss_error(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """``(N,)`` |got - want|, 0 where both are the same infinity, NaN where got is NaN."""
    same_inf = np.isinf(got) & np.isinf(want) & (np.sign(got) == np.sign(want))
    with np.errstate(invalid="ignore"):
        return np.where(same_inf, 0.0, np.abs(got - want))


def result_errors(got, want) -> tuple[np.ndarray, np.ndarray]:
    """The NaN-aware errors of a result (``.loss (N,)``, ``.grad_logits (T, N, C)``) against
    another, entry by entry in float64: ``(loss (N,), grad (T, N, C))``, the loss's by
    :func:`loss_error`, the gradient's ``|got - want|`` (an infinite entry is NaN: wrong),
    as :class:`Checks` measures them for compare."""
    with np.errstate(invalid="ignore"):
        grad = np.abs(np.asarray(got.grad_logits, np.float64) - want.grad_logits)
    return loss_error(np.asarray(got.loss, np.float64), np.asarray(want.loss, np.float64)), grad


def max_error(x) -> float:
    """The largest entry of ``x``; NaN when any is NaN (a NaN error is the worst kind)."""
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return 0.0
    return float("nan") if np.isnan(x).any() else float(x.max())


def worst(a: float, b: float) -> float:
    """max that keeps NaN (a NaN error is the worst kind)."""
    return a if math.isnan(a) else b if math.isnan(b) else max(a, b)


class Checks:
    """Collects the worst error of each kind and a reason for each failed check."""

    def __init__(self, tol):
        self.tol = tol
        self.abs_err = self.rel_err = self.grad_err = self.ref_loss_err = self.ref_grad_err = 0.0
        self.margin = 0.0  # worst error / allowed error over every check; > 1 fails
        self.failures: list[str] = []

    def fail(self, what: str) -> None:
        if what not in self.failures:
            self.failures.append(what)

    def loss(self, got, want, label: str, against: str) -> tuple[float, float]:
        """Worst absolute and relative loss error; records a failure beyond tolerance."""
        err = loss_error(got, want)
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.where(np.isfinite(want) & (want != 0), err / np.abs(want), err)
        allowed = self.tol.loss_atol + self.tol.loss_rtol * np.where(np.isfinite(want),
                                                                     np.abs(want), 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.margin = worst(self.margin, max_error(np.where(err == 0, 0.0, err / allowed)))
        bad = [n for n in range(len(want)) if not self.tol.loss_ok(err[n], want[n])]
        if bad:
            n = bad[0]
            self.fail(f"loss vs {against} [{label}] sample {n}: got {got[n]:.7g}, "
                       f"want {want[n]:.7g}")
        return max_error(err), max_error(rel)

    def grad(self, got, want, label: str, against: str) -> float:
        with np.errstate(invalid="ignore"):
            diff = np.abs(got - want)  # (T, N, C), as result_errors measures it
        err = max_error(diff)
        allowed = self.tol.grad_allowed(np.where(np.isfinite(want), want, 0.0))  # (T, N, C)
        with np.errstate(invalid="ignore", divide="ignore"):
            over = np.where(diff == 0, 0.0, diff / allowed)  # (T, N, C) error / allowed
        self.margin = worst(self.margin, max_error(over))
        if not max_error(over) <= 1:  # NaN fails too
            t, n, c = np.unravel_index(np.nanargmax(np.where(np.isnan(over), np.inf, over)),
                                       over.shape)
            self.fail(f"grad vs {against} [{label}] err {diff[t, n, c]:.2g} > "
                      f"{allowed[t, n, c]:.2g} at t={t} n={n} c={c} (max err {err:.2g})")
        return err


def problem_tolerance(problem) -> Tolerance:
    """The case library's default tolerance for the problem's dtype. Below float64 it widens to
    the round-off of log-space arithmetic: a few ``eps * M`` with ``M`` the largest sum over a
    sample's frames of the largest ``|log p|`` (a forward variable is a sum of that many terms)."""
    tol = DEFAULT_TOLERANCES[problem.dtype]
    if problem.dtype == "float64":
        return tol
    eps = float(np.finfo(np.float32 if problem.dtype in ("float32", "bfloat16") else np.float16).eps)
    if problem.dtype == "bfloat16":
        eps = 2.0 ** -8
    lp = np.where(problem.frame_mask[..., None], np.abs(problem.log_probs()), 0.0)  # (T, N, C)
    lp = np.where(np.isfinite(lp), lp, 0.0)
    slack = 8 * eps * float(lp.max(axis=2, initial=0.0).sum(axis=0).max(initial=0.0) + problem.shape[0])
    return Tolerance(loss_rtol=tol.loss_rtol, loss_atol=max(tol.loss_atol, slack),
                     grad_atol=max(tol.grad_atol, slack))


DIFFERENT_CALLS = "deterministic:"  # how run_to_run's line begins


def call_differences(first, second) -> dict[str, float | None]:
    """Two calls' results on one problem (``.loss (N,)``, ``.grad_logits (T, N, C)``), per
    part (``loss``, ``grad``): None where they are the same bits (NaN equal to NaN), else the
    largest difference as :func:`result_errors` measures it (NaN where only one is NaN)."""
    errors = dict(zip(("loss", "grad"), result_errors(first, second)))
    same = {"loss": np.array_equal(first.loss, second.loss, equal_nan=True),
            "grad": np.array_equal(first.grad_logits, second.grad_logits, equal_nan=True)}
    return {name: None if same[name] else max_error(err) for name, err in errors.items()}


def run_to_run(first, second, tol: float | None = None) -> str | None:
    """Two calls' results on one problem: what differs, one line, or None. ``tol`` None wants
    the same bits (NaN equal to NaN); a number (a backend's ``nondeterministic`` trait) allows
    that much, absolute, per entry."""
    for name, worst_diff in call_differences(first, second).items():
        if worst_diff is None:
            continue
        if tol is None or not worst_diff <= tol:
            within = "" if tol is None else f", more than the {tol:g} it declares"
            return (f"{DIFFERENT_CALLS} a second call gave another {name} "
                    f"(max diff {worst_diff:.3g}{within})")
    return None


LARGEST = {"float16": 65504.0}  # the largest finite number of a result dtype, where it bites


def wrong(problem, got, want, against: str) -> str | None:
    """What is wrong with the result ``got`` (``.loss (N,)``, ``.grad_logits (T, N, C)``) on
    ``problem`` against the exact ``want`` (one line), or None when it is right: the loss
    invariants first (their own reason), then loss and gradient within ``problem_tolerance``,
    then the gradient invariants. The judgement of ``fuzz`` and ``datasheet`` alike."""
    dtype = problem.dtype
    # a loss past the dtype's largest number (65504 in float16) may come back +inf: the result
    # type overflows, the backend is not wrong
    got_loss = np.asarray(got.loss, np.float64)
    want_loss = np.asarray(want.loss, np.float64)
    overflow = np.isposinf(got_loss) & (want_loss > LARGEST.get(dtype, np.inf))  # (N,)
    loss = np.where(overflow, want_loss, got_loss)  # (N,)
    broken = broken_loss_invariants(problem, loss)
    if broken:
        return f"invariant broken: {broken[0]}"
    tol = problem_tolerance(problem)
    checks = Checks(tol)
    checks.loss(loss, want_loss, dtype, against)
    checks.grad(np.asarray(got.grad_logits, np.float64), want.grad_logits, dtype, against)
    if checks.failures:
        return checks.failures[0]
    broken = broken_invariants(problem, loss, got.grad_logits,
                               tol=None if dtype == "float64" else tol.grad_atol)
    return f"invariant broken: {broken[0]}" if broken else None
