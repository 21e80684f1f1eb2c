"""Is a backend right on one problem? Loss and gradient against a reference, and the invariants."""
from __future__ import annotations

import numpy as np

from ctcbench.caselib.builders import build_raw, to_problem
from ctcbench.caselib.library import DEFAULT_TOLERANCES, Tolerance
from ctcbench.core.invariants import broken_invariants
from ctcbench.runtime.registry import BackendFailure, UnsupportedProblem


def tolerance(problem) -> Tolerance:
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


def problem_of(build: dict, dtype: str):
    """The problem a drawn (or a case file's) ``[case.build]`` table makes, in ``dtype``."""
    return to_problem(build_raw(build, case="fuzz"), dtype)


def judge(backend, reference, build: dict, dtype: str) -> str | None:
    """What is wrong with ``backend`` on this problem (one line), or None when it is right.

    A problem the backend declares unsupported is not a failure. The reference failing is an
    error of the harness, raised as is.
    """
    problem = problem_of(build, dtype)
    want = reference.run(problem)
    try:
        got = backend.run(problem)
    except UnsupportedProblem:
        return None
    except BackendFailure as exc:  # the worker died or hung
        return f"{exc.status}: {exc}"
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    tol = tolerance(problem)
    g_loss, w_loss = np.asarray(got.loss, np.float64), np.asarray(want.loss, np.float64)
    for n in range(len(w_loss)):
        g, w = g_loss[n], w_loss[n]
        same_inf = np.isinf(g) and np.isinf(w) and np.sign(g) == np.sign(w)
        if not same_inf and not (abs(g - w) <= tol.loss_atol + tol.loss_rtol * abs(w)):
            return f"loss sample {n}: got {g:.10g}, want {w:.10g}"
    with np.errstate(invalid="ignore"):
        diff = np.abs(np.asarray(got.grad_logits, np.float64) - want.grad_logits)  # (T, N, C)
    if diff.size and not np.nanmax(np.where(np.isnan(diff), np.inf, diff)) <= tol.grad_atol:
        t, n, c = np.unravel_index(np.argmax(np.where(np.isnan(diff), np.inf, diff)), diff.shape)
        return (f"gradient at t={t} n={n} c={c}: got {got.grad_logits[t, n, c]:.12g}, "
                f"want {want.grad_logits[t, n, c]:.12g}")
    broken = broken_invariants(problem, got.loss, got.grad_logits,
                               tol=None if dtype == "float64" else tol.grad_atol)
    return f"invariant broken: {broken[0]}" if broken else None
