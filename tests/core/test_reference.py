"""The NumPy reference against independent oracles, on both of its paths (scaled, log space)."""
from __future__ import annotations

import math

import numpy as np
import pytest

from conftest import brute_force_batch, random_problem
from ctcbench import CTCProblem, get_backend
from ctcbench.core import oracles
from ctcbench.core import reference
from ctcbench.backends.numpy_ref import NumpyBackend
from ctcbench.core.reference import forward_backward


@pytest.fixture(params=["one_loop", "two_loops"], autouse=True)
def loop_form(request, monkeypatch):
    """Every test runs with forward and backward in one shared time loop and in two loops."""
    monkeypatch.setattr(reference, "ONE_LOOP_MAX_STATES",
                        10**9 if request.param == "one_loop" else -1)
    return request.param



def _check_against_brute(problem: CTCProblem):
    result = get_backend("numpy").run(problem)
    loss, grad = brute_force_batch(problem)
    np.testing.assert_array_equal(np.isinf(result.loss), np.isinf(loss))
    finite = np.isfinite(loss)
    np.testing.assert_allclose(result.loss[finite], loss[finite], rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(result.grad_logits, grad, rtol=1e-9, atol=1e-10)
    return result


@pytest.mark.parametrize("blank", [0, 2, 3])
def test_matches_brute_force_with_padding_and_blank_anywhere(blank):
    """Loss and gradient equal path enumeration; NaN padding, blank at 0/middle/last."""
    rng = np.random.default_rng(10 + blank)
    for _ in range(4):
        problem = random_problem(rng, T=6, N=5, C=4, L=3, blank=blank)
        _check_against_brute(problem)


def test_matches_brute_force_on_repeats_infeasible_and_empty_inputs():
    """Adjacent repeats, infeasible targets (inf, zero gradient), input length 0, empty target."""
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(5, 5, 3)) * 2  # (T, N, C)
    targets = np.array([[1, 1, 2], [1, 1, 1], [2, 2, 0], [1, 2, 0], [0, 0, 0]])
    input_lengths = np.array([5, 4, 0, 5, 3])
    target_lengths = np.array([3, 3, 0, 2, 0])  # sample 1 needs 5 frames but has 4
    logits[4:, 1] = np.nan
    problem = CTCProblem(logits, targets, input_lengths, target_lengths)
    result = _check_against_brute(problem)
    assert math.isinf(result.loss[1]) and result.loss[2] == 0.0


def test_confident_logits_take_the_log_space_path_and_stay_exact():
    """Logits of scale 400 underflow probabilities: those samples go through log space, exactly."""
    rng = np.random.default_rng(5)
    problem = random_problem(rng, T=6, N=6, C=3, L=3, scale=400.0, full_length=True,
                             garbage=False)
    _check_against_brute(problem)
    assert NumpyBackend().run(problem).fb.log_space.any()


def test_uniform_closed_form_for_long_sequences():
    """Uniform predictions: loss = T log C - log binom(T + L - r, 2L), at T = 3000, to 1e-9."""
    T, C = 3000, 7
    targets = np.array([[1, 1, 2, 3, 3, 3, 4] * 20, [5, 6] * 70])  # (N, L) with repeats
    target_lengths = np.array([140, 140])
    problem = CTCProblem(np.zeros((T, 2, C)), targets, np.array([T, 2500]), target_lengths)
    result = get_backend("numpy").run(problem)
    expected = [oracles.uniform_loss(3000, C, targets[0]),
                oracles.uniform_loss(2500, C, targets[1])]
    np.testing.assert_allclose(result.loss, expected, rtol=1e-9)


def test_forward_backward_tables_agree_with_brute_force():
    """Public forward_backward: loss, class posterior (= softmax - grad) and log_alpha ends."""
    rng = np.random.default_rng(7)
    problem = random_problem(rng, T=5, N=4, C=4, L=3, garbage=True)
    fb = forward_backward(problem.log_probs(), problem.targets, problem.input_lengths,
                          problem.target_lengths, blank=problem.blank)
    loss, grad = brute_force_batch(problem)
    finite = np.isfinite(loss)
    np.testing.assert_allclose(fb.loss[finite], loss[finite], rtol=1e-9)
    keep = (problem.frame_mask & finite[None, :])[..., None]
    gamma = np.where(keep, np.exp(problem.log_probs()) - grad, 0.0)
    np.testing.assert_allclose(fb.class_posterior, gamma, atol=1e-10)
    for n in np.flatnonzero(finite & (problem.input_lengths > 0)):
        t, S_n = problem.input_lengths[n] - 1, 2 * problem.target_lengths[n] + 1
        final = fb.log_alpha[t, n, max(S_n - 2, 0):S_n]
        assert -np.logaddexp.reduce(final) == pytest.approx(loss[n], rel=1e-9)
        assert np.logaddexp.reduce(fb.log_alpha[0, n] + fb.log_beta[0, n]) == pytest.approx(
            -loss[n], rel=1e-9)


def test_non_contiguous_logits_give_the_brute_force_gradient():
    """Logits in a permuted memory layout (e.g. after x[..., order]) still get the exact gradient."""
    rng = np.random.default_rng(31)
    logits = np.ascontiguousarray(rng.normal(size=(4, 2, 6)).transpose(2, 1, 0)[..., [3, 0, 1, 2]])
    logits = np.asfortranarray(logits)  # (T, N, C) = (6, 2, 4), not C-contiguous
    problem = CTCProblem(logits, np.array([[0, 2, 2], [1, 3, 3]]), np.array([6, 4]),
                         np.array([3, 1]), blank=3)
    assert not problem.logits.flags.c_contiguous
    _check_against_brute(problem)

