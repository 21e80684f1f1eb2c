"""ctcbench.core.invariants: the loss invariants (never below 0, +inf exactly when infeasible)
against brute force, and each broken one named."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ctcbench import CTCProblem
from ctcbench.core import oracles
from ctcbench.core.invariants import broken_loss_invariants, reachable


def test_reachable_is_a_finite_brute_force_loss(rng):
    """With classes masked at -inf in random frames, a target is reachable exactly where the
    enumeration of every path gives a finite loss."""
    for _ in range(300):
        C, T, N = int(rng.integers(2, 5)), int(rng.integers(0, 6)), int(rng.integers(1, 4))
        blank = int(rng.integers(0, C))
        labels = [c for c in range(C) if c != blank]
        x = rng.normal(size=(T, N, C))
        x[rng.random((T, N, C)) < 0.3] = -np.inf
        x[np.isneginf(x).all(axis=2), 0] = 0.0  # a frame keeps one class
        L = int(rng.integers(0, 4))
        targets = rng.choice(labels, size=(N, max(L, 1)))
        lengths, inputs = rng.integers(0, L + 1, size=N), rng.integers(0, T + 1, size=N)
        got = reachable(CTCProblem(x, targets, inputs, lengths, blank=blank))
        for n in range(N):
            loss, _ = oracles.brute_force(x[:inputs[n], n], targets[n, :lengths[n]], blank=blank)
            assert got[n] == math.isfinite(loss)


PROBLEM = CTCProblem(np.zeros((2, 3, 3)), [[1], [1], [1]], [2, 2, 2], [1, 1, 1])


@pytest.mark.parametrize("loss, message", [
    ([math.log(2), -2.06e-8, 1.0], "loss below 0: got -2.06e-08 for sample 1"),
    ([math.log(2), math.inf, 1.0], "loss finite for a feasible target: got inf for sample 1"),
    ([math.nan, 1.0, 1.0], "loss is a number in [0, inf]: got nan for sample 0"),
    ([-math.inf, 1.0, 1.0], "loss is a number in [0, inf]: got -inf for sample 0"),
])
def test_each_broken_loss_invariant_is_named(loss, message):
    """Every way a loss can be impossible is its own line, naming the sample."""
    broken = broken_loss_invariants(PROBLEM, np.array(loss))
    assert len(broken) == 1 and broken[0].startswith(message)


def test_a_finite_loss_for_an_infeasible_target_is_broken():
    """Target [1 1] needs 3 frames: in 2 its loss is +inf, a finite one is wrong; samples that
    are not checked are not reported."""
    problem = CTCProblem(np.zeros((2, 2, 3)), [[1, 1], [1, 1]], [2, 2], [2, 2])
    assert broken_loss_invariants(problem, np.array([math.inf, math.inf])) == []
    assert broken_loss_invariants(problem, np.array([5.0, math.inf])) == [
        "loss +inf for an infeasible target: got 5 for sample 0"]
    assert broken_loss_invariants(problem, np.array([5.0, math.inf]),
                                  samples=np.array([False, True])) == []


def test_zero_is_a_loss():
    """An empty target on no frames has probability 1: loss 0 breaks nothing."""
    problem = CTCProblem(np.zeros((1, 1, 2)), np.zeros((1, 0), np.int64), [0], [0])
    assert broken_loss_invariants(problem, np.array([0.0])) == []


@pytest.mark.parametrize("C,drift,broken", [(8, 5e-4, True), (2**20, 5e-4, False),
                                            (2**20, 5e-2, True)])
def test_a_row_sum_may_drift_like_sqrt_C_in_float32(C, drift, broken):
    """The closed-form gradient softmax - one-hot with the softmax scaled by (1 + drift), as
    a float32 normaliser summed over C classes leaves it: every entry is within 1e-9 of the
    truth at C = 2**20, the row sums to ``drift``. That is round-off at 2**20 classes (allowed
    8 eps sqrt(C) ~ 1e-3 more), a wrong gradient at 8 classes or at drift 5e-2."""
    from ctcbench.core.invariants import broken_invariants
    logits = np.zeros((1, 1, C), np.float32)  # (T, N, C) uniform: softmax 1/C everywhere
    problem = CTCProblem(logits, np.array([[1]]), np.array([1]), np.array([1]))
    grad = np.full((1, 1, C), (1 + drift) / C)  # (T, N, C)
    grad[0, 0, 1] -= 1.0  # the one path through label 1
    found = broken_invariants(problem, np.array([math.log(C)]), grad)
    assert bool([b for b in found if "row sums to 0" in b]) == broken, found
