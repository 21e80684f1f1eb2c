"""Run a backend on one problem in its worker process and say what happened: right, wrong by
how much, a refusal with its message, a crash, a hang, out of memory."""
from __future__ import annotations

import time


from ctcbench.caselib.judge import max_error, result_errors, wrong
from ctcbench.core.memory import estimate_bytes_for
from ctcbench.datasheet.search import Outcome, Status
from ctcbench.runtime.protocol import BackendCrashed, BackendTimeout, UnsupportedProblem

# what a framework's out-of-memory error says, in the message or the type name
_MEMORY_WORDS = ("MemoryError", "out of memory", "OutOfMemory", "ResourceExhausted",
                 "Cannot allocate memory", "bad_alloc")
COPIES = 40  # bytes per logit alive at once: ours, the worker's, both gradients, the oracle's


def problem_bytes(T: int, N: int, C: int, L: int) -> int:
    """Peak bytes one probe needs here and in the worker (an estimate)."""
    return estimate_bytes_for(T, N, C, L) + COPIES * T * N * C


def _memory(text: str) -> bool:
    return any(w.lower() in text.lower() for w in _MEMORY_WORDS)


def call(backend, problem, timeout_s: float):
    """``backend.run(problem)`` (a worker-backed ``LoadedBackend``) allowed ``timeout_s``
    seconds; returns ``(result, None)`` or ``(None, Outcome)`` saying how it failed."""
    try:
        return backend.run(problem, timeout_s=float(timeout_s)), None
    except BackendTimeout:
        return None, Outcome(Status.HANGS, f"no answer within {timeout_s:.3g} s (the worker was killed)")
    except BackendCrashed as exc:
        how = exc.signal or f"exit code {exc.exitcode}"
        if exc.signal == "SIGKILL" or _memory(str(exc)):
            return None, Outcome(Status.OUT_OF_MEMORY, f"the worker was killed ({how}): {exc}")
        return None, Outcome(Status.CRASHES, f"{how}: {exc}")
    except MemoryError as exc:
        return None, Outcome(Status.OUT_OF_MEMORY, f"MemoryError: {exc}")
    except UnsupportedProblem as exc:
        return None, Outcome(Status.REFUSES, f"UnsupportedProblem: {exc}")
    except Exception as exc:  # the backend's own error: a refusal, or memory running out
        text = f"{type(exc).__name__}: {exc}"
        return None, Outcome(Status.OUT_OF_MEMORY if _memory(text) else Status.REFUSES, text[:500])


def exact(oracle, problem):
    """The oracle's answer; its failure (memory, most often) is the harness's, said in one
    line naming the oracle and the problem's size, never charged to the backend."""
    try:
        return oracle.run(problem)
    except Exception as exc:
        T, N, C, L = problem.shape
        raise RuntimeError(f"the oracle {oracle.name} failed on T={T} N={N} C={C} L={L} "
                           f"({type(exc).__name__}: {exc}); lower --max-memory to keep "
                           f"sizes it can take") from None


def errors(got, want) -> tuple[float, float]:
    """The largest absolute loss error (0 where both are the same infinity) and gradient error."""
    loss, grad = result_errors(got, want)
    return max_error(loss), max_error(grad)


def probe(backend, oracle, problem, timeout_s: float) -> Outcome:
    """The backend on ``problem`` judged against ``oracle`` (exact in float64), as
    ``fuzz`` judges it (:func:`ctcbench.caselib.judge.wrong`)."""
    start = time.monotonic()
    got, failed = call(backend, problem, timeout_s)
    seconds = time.monotonic() - start
    if failed is not None:
        failed.seconds = seconds
        return failed
    want = exact(oracle, problem)
    loss_err, grad_err = errors(got, want)
    reason = wrong(problem, got, want, oracle.name)
    status = (Status.OK if reason is None else Status.INVALID if reason.startswith("invariant")
              else Status.WRONG)
    return Outcome(status, reason or "", loss_err, grad_err, seconds)
