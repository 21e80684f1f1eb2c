"""The float64 NumPy reference against independent oracles."""
import math

import numpy as np
import pytest

from ctcbench import CTCProblem, get_backend
from ctcbench.core import oracles
from conftest import check_against_brute_force, random_problem



@pytest.mark.parametrize("seed", range(12))
def test_matches_brute_force_on_random_problems(seed):
    """Random sizes, blank at 0, middle or last, repeats, NaN padding, infeasible targets."""
    rng = np.random.default_rng(seed)
    C = int(rng.integers(2, 5))
    T = int(rng.integers(1, 7)) if C < 4 else int(rng.integers(1, 6))
    problem = random_problem(rng, T=T, N=int(rng.integers(1, 5)), C=C, L=int(rng.integers(0, 4)),
                             blank=[0, C // 2, C - 1][seed % 3], feasible=seed % 2 == 0)
    check_against_brute_force(problem, get_backend("numpy").run(problem))


def test_blank_position_invariance():
    """Moving the blank from 0 to C-1 with relabelled classes changes nothing."""
    rng = np.random.default_rng(7)
    p0 = random_problem(rng, T=30, N=3, C=6, L=8, blank=0, garbage=False)
    perm = np.r_[1:6, 0]  # new class j holds old class perm[j]; old blank 0 -> new index 5
    relabel = np.argsort(perm)  # old class -> new class
    targets = np.where(np.arange(p0.targets.shape[1]) < p0.target_lengths[:, None],
                       relabel[p0.targets], 0)
    p5 = CTCProblem(p0.logits[..., perm], targets, p0.input_lengths, p0.target_lengths, blank=5)
    r0, r5 = get_backend("numpy").run(p0), get_backend("numpy").run(p5)
    np.testing.assert_allclose(r5.loss, r0.loss, rtol=1e-12)
    np.testing.assert_allclose(r5.grad_logits, r0.grad_logits[..., perm], atol=1e-12)


@pytest.mark.parametrize("T, C, target", [
    (2000, 5, [1, 2, 3, 4] * 10),
    (4000, 30, list(range(1, 30)) * 20 + [7, 7, 7]),
    (2500, 3, [1, 1, 2, 2] * 100),
])
def test_uniform_predictions_at_long_T_match_closed_form(T, C, target):
    """Exact at T in the thousands, where a probability-space recursion underflows."""
    problem = CTCProblem(np.zeros((T, 1, C)), np.array([target]), [T], [len(target)])
    loss = get_backend("numpy").run(problem).loss[0]
    assert loss == pytest.approx(oracles.uniform_loss(T, C, target), rel=1e-9)


def test_single_valid_alignment_closed_form():
    """T = L + repeats: the loss is minus the log-probability of the one path."""
    rng = np.random.default_rng(3)
    target, path = [2, 2, 1, 3, 3, 3], [2, 0, 2, 1, 3, 0, 3, 0, 3]
    logits = rng.normal(size=(len(path), 1, 4)) * 3
    problem = CTCProblem(logits, np.array([target]), [len(path)], [len(target)])
    result = get_backend("numpy").run(problem)
    assert result.loss[0] == pytest.approx(oracles.path_loss(logits[:, 0], path), rel=1e-12)
    # All posterior mass sits on the path: gradient = softmax - one_hot(path).
    one_hot = np.eye(4)[path]
    np.testing.assert_allclose(result.grad_logits[:, 0], np.exp(oracles.log_softmax(logits[:, 0])) - one_hot,
                               atol=1e-12)


def test_empty_target_and_zero_length_input():
    """Empty target: -sum log p(blank); input length 0 with empty target: 0; with a label: inf."""
    logits = np.random.default_rng(4).normal(size=(6, 3, 5))
    problem = CTCProblem(logits, np.array([[1], [1], [1]]), [6, 0, 0], [0, 0, 1], blank=2)
    result = get_backend("numpy").run(problem)
    assert result.loss[0] == pytest.approx(oracles.empty_target_loss(logits[:, 0], blank=2), rel=1e-12)
    assert result.loss[1] == 0.0 and result.loss[2] == math.inf
    assert not result.grad_logits[:, 1:].any()


def test_infeasible_target_is_inf_with_zero_gradient():
    """Too few frames for the labels and their repeats: +inf and no gradient; others unaffected."""
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(4, 2, 3))
    problem = CTCProblem(logits, np.array([[1, 1, 2], [1, 2, 1]]), [3, 3], [3, 3])  # needs 4, 3
    result = get_backend("numpy").run(problem)
    assert result.loss[0] == math.inf and not result.grad_logits[:, 0].any()
    assert result.loss[1] == pytest.approx(oracles.brute_force(logits[:3, 1], [1, 2, 1])[0], rel=1e-12)


def test_gradient_matches_central_finite_differences():
    """d(sum of losses)/d logits, numerically, on a problem too big to enumerate."""
    rng = np.random.default_rng(6)
    problem = random_problem(rng, T=12, N=2, C=5, L=4, garbage=False)
    backend = get_backend("numpy")
    grad = backend.run(problem).grad_logits
    h = 1e-5
    for idx in [tuple(rng.integers(0, s) for s in problem.logits.shape) for _ in range(25)]:
        up, down = problem.logits.copy(), problem.logits.copy()
        up[idx] += h
        down[idx] -= h
        f = lambda x: backend.run(problem.with_logits(x)).loss.sum()
        assert grad[idx] == pytest.approx((f(up) - f(down)) / (2 * h), abs=1e-7)


def test_posteriors_are_distributions():
    """The state posteriors sum to one over states on every valid frame of a feasible sample."""
    rng = np.random.default_rng(8)
    problem = random_problem(rng, T=40, N=4, C=7, L=10)
    result = get_backend("numpy").run(problem)
    occupancy = result.raw.fb.state_posterior.sum(axis=2)  # (T, N)
    expected = problem.frame_mask & np.isfinite(result.loss)[None, :]
    np.testing.assert_allclose(occupancy, expected.astype(float), atol=1e-10)


def test_float32_input_is_computed_in_float64():
    """The reference computes in float64 whatever the input dtype."""
    rng = np.random.default_rng(9)
    p32 = random_problem(rng, T=20, N=2, C=4, L=5, dtype=np.float32)
    p64 = p32.with_logits(p32.logits.astype(np.float64))
    r32, r64 = get_backend("numpy").run(p32), get_backend("numpy").run(p64)
    assert r32.compute_dtype == "float64"
    np.testing.assert_array_equal(r32.loss, r64.loss)
