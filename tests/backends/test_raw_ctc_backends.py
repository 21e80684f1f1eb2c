"""Each built-in backend's ``raw_ctc`` on valid input, through its worker, against the float64
reference (the ``numpy`` backend, in this process).

Only valid problems are sent here: what a framework does on malformed input is measured by
``ctcbench datasheet``, always in a worker. Backends whose package is missing are skipped
with the install hint.
"""
from __future__ import annotations

import numpy as np
import pytest

from ctcbench import BackendUnavailable, CTCProblem, get_backend
from ctcbench.runtime.registry import BUILTIN_BACKENDS
from ctcbench.runtime.worker import shutdown_workers

FLOAT32 = (1e-5, 2e-5)  # (loss rel, grad abs): float32 logits computed in float32, vs float64
FLOAT64 = {"numpy": (0.0, 0.0), "numba": (1e-9, 1e-9)}  # the built-ins that compute in float64

pytestmark = pytest.mark.usefixtures("one_thread")  # workers on one thread each


@pytest.fixture(scope="module", autouse=True)
def _stop_workers():
    yield
    shutdown_workers()


def valid_arrays(rng, *, T=8, N=3, C=5, S=3, blank=0):
    """A feasible ragged batch as raw arrays: float32 logits (finite everywhere, padded
    frames too), int64 padded targets with at least one label each (pad value a non-blank
    label), every input at least one frame."""
    labels = np.array([c for c in range(C) if c != blank])
    logits = (rng.normal(size=(T, N, C)) * 2).astype(np.float32)  # (T, N, C)
    targets = rng.choice(labels, size=(N, S)).astype(np.int64)  # (N, S)
    target_lengths = rng.integers(1, S + 1, size=N).astype(np.int64)
    input_lengths = np.empty(N, np.int64)
    for n in range(N):
        t = targets[n, :target_lengths[n]]
        need = len(t) + int((t[1:] == t[:-1]).sum())
        input_lengths[n] = rng.integers(need, T + 1)
        targets[n, target_lengths[n]:] = labels[0]
    input_lengths[0] = T  # one full-length sample (torch-cudnn wants every input == T)
    return logits, targets, input_lengths, target_lengths


def reference(logits, targets, input_lengths, target_lengths, blank):
    """The float64 reference's loss (N,) and gradient (T, N, C) w.r.t. the logits."""
    problem = CTCProblem(logits.astype(np.float64), targets, input_lengths, target_lengths,
                         blank=blank)
    result = get_backend("numpy").run(problem)
    return result.loss, result.grad_logits


def backend_or_skip(name):
    try:
        return get_backend(name, isolated=True)
    except BackendUnavailable as exc:
        pytest.skip(f"needs backend {name}: {exc}")  # exc holds the install hint


@pytest.mark.parametrize("blank", [0, 4])
@pytest.mark.parametrize("name", sorted(BUILTIN_BACKENDS))
def test_raw_ctc_matches_the_reference_on_valid_input(rng, name, blank):
    """loss (N,) and, where given, grad_logits (T, N, C) on valid frames equal the float64
    reference within float32 tolerance."""
    backend = backend_or_skip(name)
    if not backend.traits.has_raw_ctc:
        pytest.skip(f"{name} has no raw_ctc hook (the datasheet's malformed-input stage "
                    f"says 'not tested' for it)")
    arrays = valid_arrays(rng, blank=blank)
    want_loss, want_grad = reference(*arrays, blank)
    out = backend.raw_ctc(*arrays, blank=blank)
    assert out.outcome == "returned", f"{out.error_type}: {out.message}"
    rel, atol = FLOAT64.get(name, FLOAT32)
    np.testing.assert_allclose(out.loss.reshape(-1), want_loss, rtol=rel, atol=rel)
    if out.grad_logits is not None:
        assert out.grad_logits.shape == want_grad.shape
        valid = np.arange(arrays[0].shape[0])[:, None] < arrays[2][None, :]  # (T, N)
        np.testing.assert_allclose(out.grad_logits[valid], want_grad[valid], atol=atol)
