"""Is a backend right on one problem? Two calls agree, loss and gradient against a reference,
and the invariants."""
from __future__ import annotations

from ctcbench.caselib.builders import problem_of
from ctcbench.caselib.judge import run_to_run, wrong
from ctcbench.runtime.protocol import BackendFailure, UnsupportedProblem


def judge(backend, reference, build: dict, dtype: str) -> str | None:
    """What is wrong with ``backend`` on this problem (one line), or None when it is right.

    The backend runs twice: two different answers are a finding unless it declares itself
    ``nondeterministic`` (then within that tolerance). A problem the backend declares
    unsupported is not a failure, nor one the reference does (``--against torch`` refuses a
    logit of -inf: it cannot judge it). The reference failing otherwise is an error of the
    harness, raised as is.
    """
    problem = problem_of(build, dtype)
    try:
        want = reference.run(problem)
    except UnsupportedProblem:
        return None
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
    return wrong(problem, got, want, reference.name)


MOST_CALLS = 20  # the most calls calls_showing makes


def calls_showing(backend, build: dict, dtype: str) -> int:
    """Calls of ``backend`` on the problem in which one gave other bits than the first (or
    more than it declares), doubled: a backend that differs on some calls only (every k-th,
    say) then shows it again wherever a replay starts in its cycle. At most ``MOST_CALLS``."""
    problem = problem_of(build, dtype)
    try:
        first = backend.run(problem)
        for call in range(2, MOST_CALLS + 1):
            again = backend.run(problem)
            if run_to_run(first, again, backend.traits.nondeterministic) is not None:
                return min(MOST_CALLS, 2 * call)
    except Exception:  # it failed otherwise on a later call: the most calls, to be sure
        pass
    return MOST_CALLS

