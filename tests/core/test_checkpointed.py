"""The checkpointed forward-backward (and the reference's invariants on both paths) against
brute force, gradient invariants at extreme scales, and -inf log-probabilities."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import brute_force_batch, random_problem
from ctcbench import CTCProblem, get_backend
from ctcbench.core import checkpointed, memory, oracles
from ctcbench.core.reference import forward_backward


@pytest.fixture(params=["tables", "checkpointed"])
def path(request, monkeypatch):
    """Each test runs on the full-table path and, forced by a zero byte limit, checkpointed."""
    if request.param == "checkpointed":
        monkeypatch.setattr(memory, "TABLE_BYTES_LIMIT", 0)
    return request.param



def _check(problem: CTCProblem, rtol=1e-9, atol=1e-10):
    result = get_backend("numpy").run(problem)
    loss, grad = brute_force_batch(problem)
    np.testing.assert_array_equal(np.isinf(result.loss), np.isinf(loss))
    finite = np.isfinite(loss)
    np.testing.assert_allclose(result.loss[finite], loss[finite], rtol=rtol, atol=1e-12)
    np.testing.assert_allclose(result.grad_logits, grad, rtol=rtol, atol=atol)
    return result


def _assert_invariants(problem: CTCProblem, grad: np.ndarray, loss: np.ndarray, tol=1e-12):
    """Per valid frame of a finite sample: row sum 0, entries in [-1, 1]; else exactly 0."""
    assert not np.isnan(grad).any()
    live = problem.frame_mask & np.isfinite(loss)[None, :]  # (T, N)
    assert np.abs(grad.sum(axis=2)[live]).max(initial=0.0) <= tol
    assert np.abs(grad).max(initial=0.0) <= 1.0 + tol
    assert (grad[~live] == 0.0).all()


@pytest.mark.parametrize("segment", [1, 2, 3, None])
@pytest.mark.parametrize("scale", [2.0, 400.0])
def test_checkpointed_matches_brute_force(monkeypatch, segment, scale):
    """Any segment length, NaN padding, confident logits redone in log space: brute force."""
    monkeypatch.setattr(memory, "TABLE_BYTES_LIMIT", 0)
    if segment is not None:
        monkeypatch.setattr(checkpointed, "segment_length", lambda T: segment)
    rng = np.random.default_rng(20 + (segment or 0))
    for _ in range(3):
        problem = random_problem(rng, T=7, N=5, C=3, L=3, scale=scale)
        _check(problem)


def test_checkpointed_class_posterior_matches_brute_force(monkeypatch):
    """Public forward_backward, checkpointed: loss and gamma (= softmax - grad) of brute force."""
    monkeypatch.setattr(memory, "TABLE_BYTES_LIMIT", 0)
    rng = np.random.default_rng(7)
    problem = random_problem(rng, T=6, N=4, C=4, L=3)
    fb = forward_backward(problem.log_probs(), problem.targets, problem.input_lengths,
                          problem.target_lengths, blank=problem.blank)
    loss, grad = brute_force_batch(problem)
    keep = (problem.frame_mask & np.isfinite(loss)[None, :])[..., None]
    np.testing.assert_allclose(fb.class_posterior,
                               np.where(keep, np.exp(problem.log_probs()) - grad, 0.0), atol=1e-10)
    with pytest.raises(ValueError, match="log_alpha: expected"):
        fb.log_alpha


@pytest.mark.parametrize("scale", [1.0, 1e3, 1e15])
def test_gradient_invariants_at_extreme_scales(path, scale):
    """Rows sum to 0, entries in [-1, 1], zero on padding/infeasible, at logit scales up to 1e15."""
    rng = np.random.default_rng(int(math.log10(scale)))
    problem = random_problem(rng, T=60, N=6, C=5, L=8, scale=scale, feasible=False)
    result = get_backend("numpy").run(problem)
    _assert_invariants(problem, result.grad_logits, result.loss)


@pytest.mark.parametrize("scale", [1e3, 1e15])
def test_empty_target_long_sequence_rows_sum_to_zero(path, scale):
    """T = 1521, C = 2, empty target, logits of scale 1e3 / 1e15: every row sums to 0."""
    rng = np.random.default_rng(1521)
    logits = rng.normal(size=(1521, 1, 2)) * scale  # (T, N, C)
    problem = CTCProblem(logits, np.zeros((1, 0), int), np.array([1521]), np.array([0]))
    result = get_backend("numpy").run(problem)
    assert result.loss[0] == pytest.approx(oracles.empty_target_loss(logits[:, 0]), rel=1e-12)
    _assert_invariants(problem, result.grad_logits, result.loss)


def test_small_problems_match_brute_force_at_scale_1e3(path):
    """Confident logits (scale 1e3) on tiny problems: loss and gradient of brute force."""
    rng = np.random.default_rng(99)
    for _ in range(3):
        problem = random_problem(rng, T=6, N=4, C=3, L=2, scale=1e3, garbage=False)
        _check(problem, rtol=1e-9, atol=1e-9)


def _masked_problem(rng, T=6, N=5, C=4, L=3):
    """A random problem with about a third of the valid logits set to -inf (one kept per frame)."""
    problem = random_problem(rng, T=T, N=N, C=C, L=L, garbage=False)
    logits = problem.logits.copy()
    mask = rng.random(logits.shape) < 0.35
    mask[np.arange(T)[:, None], np.arange(N)[None, :], rng.integers(0, C, size=(T, N))] = False
    logits[mask] = -np.inf
    return CTCProblem(logits, problem.targets, problem.input_lengths, problem.target_lengths)


def test_minus_inf_logits_match_brute_force(path):
    """-inf logits: brute-force loss and gradient (0 on masked classes), +inf where no path
    survives, no NaN anywhere."""
    rng = np.random.default_rng(11)
    seen_inf = False
    for _ in range(6):
        problem = _masked_problem(rng)
        result = _check(problem)
        masked = np.isneginf(problem.logits) & problem.frame_mask[..., None]
        assert (result.grad_logits[masked] == 0.0).all()
        _assert_invariants(problem, result.grad_logits, result.loss)
        seen_inf |= bool((np.isinf(result.loss) & problem.feasible()).any())
    assert seen_inf  # some feasible target lost every alignment to a zero-probability label


def test_target_through_zero_probability_label_is_infinite(path):
    """A label with probability 0 in every frame: loss +inf, gradient 0, other samples exact."""
    logits = np.random.default_rng(3).normal(size=(5, 2, 4))  # (T, N, C)
    logits[:, 0, 2] = -np.inf
    problem = CTCProblem(logits, np.array([[1, 2], [1, 2]]), np.array([5, 5]), np.array([2, 2]))
    result = _check(problem)
    assert result.loss[0] == np.inf and (result.grad_logits[:, 0] == 0.0).all()
    assert np.isfinite(result.loss[1])


def test_minus_inf_matches_torch_ctc_loss(path):
    """torch.nn.functional.ctc_loss on the same -inf log-probs: same finite losses, and the
    same gradient w.r.t. the logits wherever torch's is finite."""
    torch = pytest.importorskip("torch", reason="needs torch: pip install torch")
    rng = np.random.default_rng(12)
    problem = _masked_problem(rng, T=12, N=6, C=5, L=4)
    result = get_backend("numpy").run(problem)
    logits = torch.tensor(problem.logits, requires_grad=True)
    lp = torch.log_softmax(logits, dim=2)
    loss = torch.nn.functional.ctc_loss(lp, torch.tensor(problem.targets),
                                        torch.tensor(problem.input_lengths),
                                        torch.tensor(problem.target_lengths),
                                        reduction="none", zero_infinity=True)
    ok = np.isfinite(result.loss)
    np.testing.assert_allclose(loss.detach().numpy()[ok], result.loss[ok], rtol=1e-9)
    loss[torch.tensor(ok)].sum().backward()
    g = logits.grad.numpy()
    where = problem.frame_mask[..., None] & ok[None, :, None] & np.isfinite(g)
    np.testing.assert_allclose(g[where], result.grad_logits[where], atol=1e-9)
