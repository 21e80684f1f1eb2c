"""Is a backend right on one problem? Two calls agree, loss and gradient against a reference,
and the invariants."""
from __future__ import annotations

import numpy as np

from ctcbench.caselib.builders import build_raw, to_problem
from ctcbench.caselib.judge import Checks, problem_tolerance, run_to_run
from ctcbench.core.invariants import broken_invariants, broken_loss_invariants
from ctcbench.runtime.protocol import BackendFailure, UnsupportedProblem

LARGEST = {"float16": 65504.0}  # the largest finite number of a result dtype, where it bites


def problem_of(build: dict, dtype: str):
    """The problem a drawn (or a case file's) ``[case.build]`` table makes, in ``dtype``."""
    return to_problem(build_raw(build, case="fuzz"), dtype)


def judge(backend, reference, build: dict, dtype: str) -> str | None:
    """What is wrong with ``backend`` on this problem (one line), or None when it is right.

    The backend runs twice: two different answers are a finding unless it declares itself
    ``nondeterministic`` (then within that tolerance). A problem the backend declares
    unsupported is not a failure. The reference failing is an error of the harness, raised as is.
    """
    problem = problem_of(build, dtype)
    want = reference.run(problem)
    try:
        got = backend.run(problem)
        again = backend.run(problem)  # run to run: the same bits, or the declared tolerance
    except UnsupportedProblem:
        return None
    except BackendFailure as exc:  # the worker died or hung
        return f"{exc.status}: {exc}"
    except Exception as exc:
        return f"error: {type(exc).__name__}: {exc}"
    differs = run_to_run(got, again, backend.traits.nondeterministic)
    if differs is not None:
        return differs
    # a loss past the dtype's largest number (65504 in float16) may come back +inf: the result
    # type overflows, the backend is not wrong
    overflow = np.isposinf(got.loss) & (want.loss > LARGEST.get(dtype, np.inf))  # (N,)
    loss = np.where(overflow, want.loss, got.loss)  # (N,)
    broken = broken_loss_invariants(problem, loss)  # before the comparison: its own reason
    if broken:
        return f"invariant broken: {broken[0]}"
    tol = problem_tolerance(problem)
    checks = Checks(tol)
    checks.loss(np.asarray(loss, np.float64), np.asarray(want.loss, np.float64), dtype,
                reference.name)
    checks.grad(np.asarray(got.grad_logits, np.float64), want.grad_logits, dtype, reference.name)
    if checks.failures:
        return checks.failures[0]
    broken = broken_invariants(problem, loss, got.grad_logits,
                               tol=None if dtype == "float64" else tol.grad_atol)
    return f"invariant broken: {broken[0]}" if broken else None
