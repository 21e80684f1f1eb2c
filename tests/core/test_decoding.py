"""A target's best path (Viterbi) against brute force over every path."""
import itertools

import numpy as np
import pytest

from ctcbench.core.ctcmath import collapse, log_softmax
from ctcbench.core.decoding import best_path, best_path_score


def _best_by_brute_force(lp, blank):
    """{labelling: the highest score of a path collapsing to it}, over all C**T paths."""
    T, C = lp.shape
    best = {}
    for path in itertools.product(range(C), repeat=T):
        score = float(lp[np.arange(T), list(path)].sum())
        label = collapse(path, blank=blank)
        best[label] = max(best.get(label, -np.inf), score)
    return best


def test_best_path_is_a_most_probable_path_of_the_target():
    """The path has T frames, spells the target, and scores what the best of all its paths
    scores; best_path_score is that score."""
    rng = np.random.default_rng(0)
    for _ in range(40):
        T, C = int(rng.integers(1, 6)), int(rng.integers(2, 5))
        blank = int(rng.integers(0, C))
        lp = log_softmax(rng.normal(size=(T, C)) * float(rng.choice([0.3, 1.0, 4.0])))
        for target, score in _best_by_brute_force(lp, blank).items():
            path, got = best_path(lp, target, blank=blank)
            assert len(path) == T and collapse(path, blank=blank) == target
            assert got == pytest.approx(score, abs=1e-12)
            assert lp[np.arange(T), list(path)].sum() == pytest.approx(score, abs=1e-12)
            assert best_path_score(lp, target, blank=blank) == got


def test_a_target_without_a_path_has_none():
    """Too few frames (a repeat needs a blank between), or none: no path, score -inf; no
    frame and no label: the empty path, probability 1."""
    lp = log_softmax(np.zeros((2, 3)))
    assert best_path(lp, [1, 1]) == (None, -np.inf)
    assert best_path(lp, [1, 2, 1]) == (None, -np.inf)
    assert best_path(np.zeros((0, 3)), [1]) == (None, -np.inf)
    assert best_path(np.zeros((0, 3)), []) == ((), 0.0)


def test_ties_stay_then_end_on_the_last_label():
    """Uniform frames: every path ties; the path ends on the last label, not the trailing
    blank, and enters each state as early as it can (a tie stays rather than moves)."""
    lp = np.log(np.full((4, 3), 1 / 3))
    assert best_path(lp, [1])[0] == (1, 1, 1, 1)
    assert best_path(lp, [1, 2])[0] == (1, 2, 2, 2)
    assert best_path(lp, [1, 1])[0] == (1, 0, 1, 1)
