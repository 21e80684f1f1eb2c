"""The oracles agree with each other: brute force against every closed form."""
import math

import numpy as np
import pytest

from ctcbench.core import oracles


@pytest.mark.parametrize("T, C, target", [
    (4, 3, [1]), (5, 3, [1, 1]), (5, 4, [1, 2, 1]), (6, 3, [2, 2, 2]), (3, 2, []), (6, 4, [3, 1, 1]),
])
def test_uniform_closed_form_matches_brute_force(T, C, target):
    """T log C - log binom(T + L - r, 2L) counts the alignments correctly."""
    loss, _ = oracles.brute_force(np.zeros((T, C)), target)
    assert loss == pytest.approx(oracles.uniform_loss(T, C, target), rel=1e-12)


def test_single_alignment_matches_brute_force():
    """With T = L + repeats the only valid path is the labels with blanks between repeats."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 3))  # T = 4 = L + r for target (1, 1, 2)
    loss, _ = oracles.brute_force(logits, [1, 1, 2])
    assert loss == pytest.approx(oracles.path_loss(logits, [1, 0, 1, 2]), rel=1e-12)


def test_empty_target_matches_brute_force():
    """The only path to the empty labelling is all-blank."""
    logits = np.random.default_rng(1).normal(size=(4, 3))
    for blank in range(3):
        loss, _ = oracles.brute_force(logits, [], blank=blank)
        assert loss == pytest.approx(oracles.empty_target_loss(logits, blank=blank), rel=1e-12)


def test_infeasible_is_inf_everywhere():
    """Too few frames: no path, loss +inf, zero gradient."""
    loss, grad = oracles.brute_force(np.zeros((2, 3)), [1, 1])
    assert loss == math.inf and not grad.any()
    assert oracles.uniform_loss(2, 3, [1, 1]) == math.inf


def test_brute_force_gradient_matches_finite_differences():
    """The enumerated gradient is d loss / d logits."""
    rng = np.random.default_rng(2)
    logits, target, h = rng.normal(size=(4, 3)), [1, 2], 1e-6
    _, grad = oracles.brute_force(logits, target)
    numeric = np.zeros_like(logits)
    for idx in np.ndindex(*logits.shape):
        up, down = logits.copy(), logits.copy()
        up[idx] += h
        down[idx] -= h
        numeric[idx] = (oracles.brute_force(up, target)[0] - oracles.brute_force(down, target)[0]) / (2 * h)
    np.testing.assert_allclose(grad, numeric, atol=1e-8)
