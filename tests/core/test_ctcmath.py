"""The shared CTC math against brute-force enumeration, torch, and hand-worked values."""
import itertools
import math
import warnings

import numpy as np
import pytest
import torch

from ctcbench.core import ctcmath
from ctcbench.core.oracles import brute_force


def _shortest_path_length(target, C: int, blank: int = 0) -> int:
    """Oracle: the fewest frames in which some path collapses to ``target`` (enumerated)."""
    for T in itertools.count():
        if any(ctcmath.collapse(p, blank=blank) == tuple(target)
               for p in itertools.product(range(C), repeat=T)):
            return T


def test_logsumexp_hand_worked_and_stable():
    """log(e^0 + e^0) = log 2, also shifted by 1000 (no overflow); a row of -inf is -inf."""
    x = np.array([[0.0, 0.0], [1000.0, 1000.0], [-np.inf, -np.inf]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ctcmath.logsumexp(x)
    assert got.shape == (3,)
    assert got[0] == pytest.approx(math.log(2), rel=1e-15)
    assert got[1] == pytest.approx(1000 + math.log(2), rel=1e-15)
    assert got[2] == -np.inf
    assert ctcmath.logsumexp(x[:2], axis=0) == pytest.approx([1000.0, 1000.0])


def test_log_softmax_matches_torch_and_normalises(rng):
    """Same values as torch.log_softmax in float64; every row of exp() sums to 1."""
    x = rng.normal(size=(5, 3, 7)) * 30  # (T, N, C)
    got = ctcmath.log_softmax(x)
    want = torch.log_softmax(torch.from_numpy(x), dim=-1).numpy()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)
    np.testing.assert_allclose(np.exp(got).sum(-1), 1.0, atol=1e-12)
    np.testing.assert_allclose(ctcmath.log_softmax(x, axis=0),
                               torch.log_softmax(torch.from_numpy(x), dim=0).numpy(), atol=1e-12)


def test_log_softmax_keeps_minus_inf_and_marks_empty_rows_nan():
    """A -inf entry stays -inf (probability 0); a row of only -inf is NaN, without a warning."""
    x = np.array([[0.0, -np.inf, 0.0], [-np.inf, -np.inf, -np.inf]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        got = ctcmath.log_softmax(x)
    assert got[0].tolist() == [-math.log(2), -np.inf, -math.log(2)]
    assert np.isnan(got[1]).all()


def test_collapse_merges_repeats_then_drops_blanks():
    """B(a a - a b b -) = (a a b): a blank separates repeats."""
    assert ctcmath.collapse([1, 1, 0, 1, 2, 2, 0], blank=0) == (1, 1, 2)
    assert ctcmath.collapse([3, 3, 3], blank=3) == ()
    assert ctcmath.collapse(np.array([2, 0, 2, 2]), blank=0) == (2, 2)


def test_emission_frames_are_where_collapse_emits():
    """Hand-worked frames: a label is emitted where it starts, blanks and repeats emit nothing."""
    assert ctcmath.emission_frames([1, 1, 0, 1, 2, 2, 0], blank=0) == [0, 3, 4]
    assert ctcmath.emission_frames([0, 0, 0], blank=0) == []
    assert ctcmath.emission_frames([2, 1, 1], blank=2) == [1]


@pytest.mark.parametrize("target", [[], [1], [1, 1], [1, 2, 1], [2, 2, 2], [1, 2, 2, 1]])
def test_min_frames_and_minimal_path_match_enumeration(target):
    """min_frames is the shortest path length found by enumeration; minimal_path is that path,
    and the only one of that length."""
    C = 3
    need = _shortest_path_length(target, C)
    assert ctcmath.min_frames(target) == need
    assert ctcmath.adjacent_repeats(target) == need - len(target)
    path = ctcmath.minimal_path(target, blank=0)
    paths = [p for p in itertools.product(range(C), repeat=need)
             if ctcmath.collapse(p, blank=0) == tuple(target)]
    assert paths == [tuple(path)]


def test_per_target_helpers_batched_with_lengths():
    """Padded (N, L) with lengths: entries past a length are never read (hand-counted)."""
    targets = np.array([[1, 1, 2, 2], [3, 3, 3, 3], [1, 2, 3, 4], [5, 5, 5, 5]])  # (N, L)
    lengths = np.array([4, 2, 3, 0])
    assert ctcmath.adjacent_repeats(targets, lengths).tolist() == [2, 1, 0, 0]
    assert ctcmath.min_frames(targets, lengths).tolist() == [6, 3, 3, 0]
    assert ctcmath.min_frames([1, 1, 2, 2, 2]) == 8


def test_feasible_is_where_brute_force_is_finite(rng):
    """A target is feasible exactly when some path reaches it: brute force gives a finite loss."""
    C = 3
    targets = np.array([[1, 1, 0], [1, 2, 1], [2, 2, 2], [1, 0, 0], [2, 1, 0]])  # (N, L)
    target_lengths = np.array([2, 3, 3, 1, 0])
    for T in range(6):
        input_lengths = np.full(len(targets), T)
        got = ctcmath.feasible(targets, input_lengths, target_lengths)
        want = [math.isfinite(brute_force(rng.normal(size=(T, C)), t[:n])[0])
                for t, n in zip(targets, target_lengths)]
        assert got.tolist() == want, T


def test_single_sequence_without_lengths_must_be_1d():
    """A 2-D target without target_lengths is a clear error naming the argument."""
    with pytest.raises(ValueError, match=r"targets: expected one sequence \(L,\)"):
        ctcmath.min_frames(np.zeros((2, 3), dtype=int))


def test_greedy_is_collapsed_best_path(rng):
    """Greedy decoding equals collapsing the single most probable path found by enumeration."""
    T, N, C = 4, 3, 3
    lp = ctcmath.log_softmax(rng.normal(size=(T, N, C)) * 2)  # (T, N, C)
    lengths = np.array([4, 3, 1])
    got = ctcmath.greedy_decode(lp, lengths)
    for n in range(N):
        t = lengths[n]
        paths = list(itertools.product(range(C), repeat=int(t)))
        best = max(paths, key=lambda p: lp[np.arange(t), n, p].sum())
        assert got[n] == ctcmath.collapse(best)


def test_greedy_uses_the_given_blank():
    """With blank = C - 1 the last class is dropped and class 0 is a label (hand-worked)."""
    lp = np.log(np.array([[[0.8, 0.2]], [[0.1, 0.9]], [[0.7, 0.3]]]))  # (T=3, N=1, C=2)
    assert ctcmath.greedy_decode(lp, [3], blank=1) == [(0, 0)]
    assert ctcmath.greedy_decode(lp, [3], blank=0) == [(1,)]
    assert ctcmath.greedy_decode(lp, [0], blank=0) == [()]


def test_edit_distance_known_values():
    """Levenshtein distances counted by hand."""
    assert ctcmath.edit_distance("kitten", "sitting") == 3
    assert ctcmath.edit_distance("", "abc") == 3
    assert ctcmath.edit_distance((1, 2, 3), (1, 2, 3)) == 0
    assert ctcmath.edit_distance((1, 2), (2, 1)) == 2
    assert ctcmath.edit_distance([1, 2, 3, 4], [2, 3]) == 2


@pytest.mark.parametrize("T, C, target, blank", [(5, 3, [1, 2], 0), (6, 4, [2, 2], 3),
                                                 (4, 3, [], 0), (7, 3, [1, 0, 1], 2),
                                                 (3, 3, [1, 1], 0)])
def test_paths_collapsing_to_is_collapse_over_every_path(T, C, target, blank):
    """The vectorised enumeration (in small chunks) keeps exactly the paths the scalar map
    keeps, in product order, and as many as the closed-form count binom(T + L - r, 2L)."""
    want = [p for p in itertools.product(range(C), repeat=T)
            if ctcmath.collapse(p, blank=blank) == tuple(target)]
    got = ctcmath.paths_collapsing_to(T, C, target, blank=blank, chunk=7)
    assert [tuple(p) for p in got.tolist()] == want
    L, r = len(target), ctcmath.adjacent_repeats(target)
    assert len(got) == (math.comb(T + L - r, 2 * L) if T >= L + r else 0)
