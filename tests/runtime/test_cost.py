"""ctcbench.runtime.cost: a call's seconds predicted from earlier calls, against calls of a
known cost (a closed form in the problem's sizes) and the optimality conditions of the fit."""
from __future__ import annotations

import numpy as np
import pytest

from ctcbench import CTCProblem
from ctcbench.runtime.cost import CostModel, nonnegative_lstsq


def problem(frames, labels, C=5) -> CTCProblem:
    """One problem with these input lengths and target lengths (one per sample)."""
    frames, labels = list(frames), list(labels)
    T, N, L = max(frames), len(frames), max(max(labels), 1)
    logits = np.zeros((T, N, C))
    targets = np.ones((N, L), np.int64)
    return CTCProblem(logits, targets, frames, labels)


def quadratic(p) -> float:
    """A per-call cost of 20 ms plus 3 us per frame pair of each sample: an O(T²) backward."""
    return 0.02 + 3e-6 * float((np.asarray(p.input_lengths, float) ** 2).sum())


def states(p) -> float:
    """15 ms a call plus 2 us per frame and extended state: an O(T·L) pass over the states."""
    frames = np.asarray(p.input_lengths, float)
    return 0.015 + 2e-6 * float((frames * (2.0 * np.asarray(p.target_lengths) + 1)).sum())


SEEN = [problem([T] * N, [L] * N) for T, N, L in
        [(30, 1, 3), (60, 2, 5), (90, 1, 10), (120, 3, 4), (150, 1, 20), (200, 2, 8),
         (250, 1, 30), (300, 1, 12)]]


@pytest.mark.parametrize("cost, growth", [(quadratic, "O(T²)"), (states, "O(T·L)")])
def test_a_long_call_is_predicted_from_short_ones_with_its_growth(cost, growth):
    """Eight calls of up to 300 frames; a call of 3000 frames and 60 labels is predicted
    within 1% of its cost, the growth named is the term that dominates it, and the call it
    is said to be read from is the slowest seen."""
    model = CostModel()
    for p in SEEN:
        model.add([p], cost(p))
    long = problem([3000], [60])
    guess = model.predict(long)
    assert guess.seconds == pytest.approx(cost(long), rel=0.01)
    assert guess.growth == growth and guess.T == 3000
    slowest = max(SEEN, key=cost)  # the call the prediction is said to be read from
    assert (guess.seen_T, guess.seen_s) == (slowest.shape[0], pytest.approx(cost(slowest)))
    assert str(guess).startswith(f"{growth}: ") and "predicted at T=3000 from" in str(guess)


def test_several_calls_timed_together_are_fitted_as_their_sum():
    """Rows of three calls each (a case's variants), timed as one: the fit still predicts
    one call."""
    model = CostModel()
    for p in SEEN:
        model.add([p, p, p], 3 * quadratic(p))
    long = problem([2000, 1000], [40, 10])
    assert model.predict(long).seconds == pytest.approx(quadratic(long), rel=0.01)


def test_nothing_is_predicted_from_calls_too_short_to_show_their_work():
    """Calls of a few milliseconds are the fixed cost of a call: however many, no prediction;
    so are fewer than four long enough ones."""
    model = CostModel()
    for p in SEEN:
        model.add([p], 0.002)
    assert model.predict(problem([3000], [60])) is None
    for p in SEEN[-3:]:
        model.add([p], quadratic(p))
    assert model.predict(problem([3000], [60])) is None
    model.add([SEEN[-4]], quadratic(SEEN[-4]))
    assert model.predict(problem([3000], [60])) is not None


@pytest.mark.parametrize("seed", range(20))
def test_the_fit_is_the_nonnegative_least_squares_optimum(seed):
    """The Karush-Kuhn-Tucker conditions: x >= 0; the gradient A^T (A x - b) is 0 where x > 0
    and >= 0 where x = 0."""
    rng = np.random.default_rng(seed)
    A, b = rng.normal(size=(12, 5)), rng.normal(size=12)
    x = nonnegative_lstsq(A, b)
    gradient = A.T @ (A @ x - b)
    assert (x >= 0).all()
    assert np.allclose(gradient[x > 0], 0, atol=1e-9)
    assert (gradient[x == 0] >= -1e-9).all()
