"""The format-2 checks of one compare row (see ``ctcbench.caselib.expect_spec``), each a small
function that adds its failures to the row's ``Checks`` (``ctcbench.compare.checks``):

  check_error        the API must refuse the case's input (one row per case, backend "input-check");
  check_reduction    reduced loss and the gradient of the reduced loss, through
                     ``ctcbench.reduce_loss`` and through the backend's own ``run_reduced``;
  check_finite_difference  central differences in float64 of the backend's own summed loss;
  check_deterministic      a second call gives bit-identical loss and gradient (or within
                           the backend's declared ``nondeterministic`` tolerance);
  check_invariants   a finite loss is never below 0, +inf exactly for infeasible targets, on
                     every variant; gradient rows sum to 0, entries in [-1, 1], 0 on padded
                     frames and infeasible samples, where weights are unit
                     (``ctcbench.core.invariants``).
Shape letters are those of ``ctcbench.core.problem``.
"""
from __future__ import annotations

import re

import numpy as np

from ctcbench.caselib.builders import to_problem
from ctcbench.caselib.expect_spec import finite_difference_spec
from ctcbench.caselib.judge import run_to_run
from ctcbench.core.arrays import to_numpy
from ctcbench.core.invariants import INVARIANT_TOL, broken_invariants, broken_loss_invariants
from ctcbench.core.reduction import reduce_loss, reduction_weights
from ctcbench.runtime.protocol import UnsupportedProblem
from ctcbench.runtime.status import Status

API = "input-check"  # the backend column of an expected-error row: no backend, the
# problem's own validation refusing bad input


def sample_mask(expect: dict, n: int) -> np.ndarray:
    """``(N,)`` bool: the samples a case checks (``expect.samples``, default all)."""
    mask = np.zeros(n, dtype=bool) if "samples" in expect else np.ones(n, dtype=bool)
    for i in expect.get("samples", ()):
        if i >= n:
            raise ValueError(f"expect.samples: expected indices < N = {n}, got {i}")
        mask[i] = True
    return mask


def check_error(case, dtype: str, raw) -> dict:
    """The row of a case whose input the API must refuse: ``ok`` when building the problem
    raises ``expect.error.type`` (or a subclass) with a message matching ``expect.error.match``."""
    spec = case.expect["error"]
    row = {"backend": API, "case": case.name, "family": case.family, "dtype": dtype,
           "device": "-", "oracle": "error", "variants": 1}
    want = f"{spec['type']} matching {spec.get('match', '')!r}"
    try:
        to_problem(raw, dtype)
    except Exception as exc:
        names = [k.__name__ for k in type(exc).__mro__]
        if spec["type"] in names and re.search(spec.get("match", ""), str(exc)):
            return {**row, "status": Status.OK, "reason": f"{type(exc).__name__}: {exc}"}
        return {**row, "status": Status.MISMATCH,
                "reason": f"expected {want}, got {type(exc).__name__}: {exc}"}
    return {**row, "status": Status.MISMATCH, "reason": f"expected {want}, got no error"}


def check_reduction(checks, backend, prep, result, reference) -> None:
    """Reduced loss and its gradient against the oracle, by ``reduce_loss`` and grad weights
    (or scaling where ``run`` takes none), and by the backend's ``run_reduced`` if it has one."""
    expect = prep.case.expect
    if "reduction" not in expect:
        return
    red, zero_inf = expect["reduction"], bool(expect.get("zero_infinity", False))
    problem, ans = prep.problems[0], prep.answers[0]
    lengths = problem.target_lengths
    w = reduction_weights(lengths, red)  # (N,)
    if zero_inf:
        w = np.where(np.isinf(ans.loss), 0.0, w)
    want = np.atleast_1d(reduce_loss(ans.loss, lengths, red, zero_infinity=zero_inf))
    base = ans.grad if ans.grad is not None else (
        reference.grad_logits if reference is not None else None)
    # without zero_infinity an infinite loss makes the reduced gradient undefined
    defined = base is not None and (zero_inf or red == "none" or np.isfinite(ans.loss).all())
    want_grad = base * w[None, :, None] if defined else None  # (T, N, C)
    label = f"{red}" + (", zero_infinity" if zero_inf else "")
    got = np.atleast_1d(reduce_loss(result.loss, lengths, red, zero_infinity=zero_inf))
    checks.loss(got, want, f"reduce_loss {label}", ans.source)
    if want_grad is not None:
        # unit weights ("sum"): the plain run's gradient, already run, is the weighted one
        if backend.traits.takes_grad_weights and not (w == 1).all():
            grad = backend.run(problem, grad_weights=w).grad_logits
        else:
            grad = result.grad_logits * w[None, :, None]
        checks.grad(grad, want_grad, f"grad of reduce_loss {label}", ans.source)
    if backend.traits.runs_reduced and not backend.isolated:
        own = backend.impl.run_reduced(problem, reduction=red, zero_infinity=zero_inf)
        loss = np.atleast_1d(to_numpy(own.loss, "run_reduced loss")[0].astype(np.float64))
        checks.loss(loss, want, f"run_reduced {label}", ans.source)
        if want_grad is not None:
            grad = to_numpy(own.grad_logits, "run_reduced grad_logits")[0].astype(np.float64)
            checks.grad(grad, want_grad, f"run_reduced grad {label}", ans.source)


def extra_calls(expect: dict) -> int:
    """The most calls of the backend these checks make beyond one per variant: two per
    finite-difference coordinate, the repeat calls, a reduction's weighted run."""
    spec = finite_difference_spec(expect)
    fd = 0 if spec is None else 2 * (len(spec["coords"]) if "coords" in spec else spec["count"])
    repeats = expect.get("calls", 2) - 1 if expect.get("deterministic", False) else 0
    return fd + repeats + ("reduction" in expect)


def fd_coords(problem, spec: dict, mask: np.ndarray) -> list[tuple[int, int, int]]:
    """The ``(t, n, c)`` coordinates to difference: the case's own, or ``count`` drawn (seeded)
    from the valid frames of the checked samples."""
    if "coords" in spec:
        return [tuple(c) for c in spec["coords"]]
    T, N, C, _ = problem.shape
    frames = np.argwhere(problem.frame_mask & mask[None, :])  # (frames, 2) as (t, n)
    if len(frames) == 0:
        return []
    rng = np.random.default_rng(spec["seed"])
    pick = rng.choice(len(frames), size=min(spec["count"], len(frames)), replace=False)
    return [(int(frames[i, 0]), int(frames[i, 1]), int(rng.integers(C))) for i in pick]


def check_finite_difference(checks, backend, prep, result) -> None:
    """The backend's gradient against central differences, in float64, of its own summed
    finite loss; skipped for a backend that does not compute in float64."""
    spec = finite_difference_spec(prep.case.expect)
    dtypes = backend.traits.dtypes
    if spec is None or (dtypes is not None and "float64" not in dtypes):
        return
    problem = prep.problems[0]
    x = problem.logits.astype(np.float64)  # (T, N, C)
    mask = sample_mask(prep.case.expect, problem.shape[1])
    h, tol = spec["step"], prep.case.tolerance(prep.dtype)

    def total(logits) -> float:
        loss = backend.run(problem.with_logits(logits)).loss
        return float(loss[np.isfinite(loss)].sum())

    for t, n, c in fd_coords(problem, spec, mask):
        if not (t < problem.input_lengths[n] and n < problem.shape[1] and c < problem.shape[2]):
            checks.fail(f"finite_difference: coordinate ({t}, {n}, {c}) is not in a valid frame")
            continue
        plus, minus = x.copy(), x.copy()
        plus[t, n, c] += h
        minus[t, n, c] -= h
        try:
            fd = (total(plus) - total(minus)) / (2 * h)
        except UnsupportedProblem:
            return
        got = result.grad_logits[t, n, c]
        allowed = max(spec["atol"], tol.grad_atol) + max(spec["rtol"], tol.grad_rtol) * abs(fd)
        err = abs(got - fd)
        checks.margin = max(checks.margin, err / allowed) if err == err else float("nan")
        if not err <= allowed:
            checks.fail(f"grad vs finite_difference at t={t} n={n} c={c}: got {got:.7g}, "
                        f"central difference {fd:.7g} (step {h:g})")


def check_deterministic(checks, backend, prep, result, run_kwargs: dict) -> None:
    """``expect.deterministic``: each later call on the base problem (``expect.calls`` in
    all, default 2) gives the first one's bits, or agrees within the backend's declared
    ``nondeterministic`` tolerance."""
    if not prep.case.expect.get("deterministic", False):
        return
    calls = prep.case.expect.get("calls", 2)
    for call in range(2, calls + 1):
        again = backend.run(prep.problems[0], **run_kwargs)
        differs = run_to_run(result, again, backend.traits.nondeterministic)
        if differs is not None:
            checks.fail(differs + ("" if calls == 2 else f" (call {call} of {calls})"))
            return


def check_invariants(checks, prep, results) -> None:
    """Loss invariants on every variant, gradient invariants on every variant run with unit
    upstream weights; failures name the invariant. Unchecked samples (``expect.samples``) are
    not checked for the loss and count as infeasible for the gradient (gradient 0 wanted).
    The tolerance is the dtype's (INVARIANT_TOL), or the case's grad_atol where that is wider
    (long float32 cases allow the kernel's accumulated round-off)."""
    tol = max(INVARIANT_TOL.get(prep.dtype, 1e-4), prep.case.tolerance(prep.dtype).grad_atol)
    for v, problem, res in zip(prep.variants, prep.problems, results):
        mask = sample_mask(prep.case.expect, problem.shape[1])
        for broken in broken_loss_invariants(problem, res.loss, samples=mask):
            checks.fail(f"invariant [{v.label}] {broken}")
        w = v.run_kwargs.get("grad_weights")
        if w is not None and not np.all(np.asarray(w) == 1):
            continue
        loss = np.where(mask, res.loss, np.inf)
        grad = np.where(mask[None, :, None], res.grad_logits, 0.0)
        for broken in broken_invariants(problem, loss, grad, tol=tol):
            checks.fail(f"invariant [{v.label}] {broken}")
