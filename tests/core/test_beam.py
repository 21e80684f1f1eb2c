"""The one prefix beam search against brute force over every path."""
import numpy as np
import pytest

from ctcbench.core.beam import prefix_beam_search
from ctcbench.core.ctcmath import collapse, log_softmax, minimal_path
from ctcbench.core.decoding import labelling_logprobs, path_score, prefix_count


def _problems(count, seed):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        T, C = int(rng.integers(1, 6)), int(rng.integers(2, 5))
        scale = float(rng.choice([0.3, 1.0, 4.0]))
        yield log_softmax(rng.normal(size=(T, C)) * scale), int(rng.integers(0, C))


def test_a_beam_that_never_prunes_scores_every_labelling_exactly():
    """At a beam of prefix_count(T, C): every labelling with a path, each with its brute-force
    log-probability, best first."""
    for lp, blank in _problems(60, seed=0):
        truth = labelling_logprobs(lp, blank=blank)
        hyps = prefix_beam_search(lp, beam=prefix_count(*lp.shape), blank=blank)
        assert {labels for labels, _ in hyps} == set(truth)
        for labels, score in hyps:
            assert score == pytest.approx(truth[labels], abs=1e-12)
        exact = [truth[labels] for labels, _ in hyps]
        assert all(a >= b - 1e-12 for a, b in zip(exact, exact[1:]))


def test_the_best_hypothesis_is_the_most_probable_labelling():
    """A wide beam's first hypothesis is the labelling the enumeration ranks first."""
    for lp, blank in _problems(60, seed=1):
        truth = labelling_logprobs(lp, blank=blank)
        best = max(truth.values())
        (labels, score), *_ = prefix_beam_search(lp, beam=prefix_count(*lp.shape), blank=blank)
        assert truth[labels] == pytest.approx(best, abs=1e-12)


@pytest.mark.parametrize("beam", [1, 2, 3, 5])
def test_a_narrow_beam_scores_at_most_the_labellings_probability(beam):
    """A pruned beam sums only the paths it kept: distinct labellings, at most ``beam``, best
    first, none scored above its brute-force log-probability."""
    for lp, blank in _problems(60, seed=2):
        truth = labelling_logprobs(lp, blank=blank)
        hyps = prefix_beam_search(lp, beam=beam, blank=blank)
        labels = [k for k, _ in hyps]
        assert 1 <= len(hyps) <= beam and len(set(labels)) == len(labels)
        assert all(blank not in k for k in labels)
        scores = [s for _, s in hyps]
        assert scores == sorted(scores, reverse=True)
        for k, s in hyps:
            assert s <= truth[k] + 1e-12


@pytest.mark.parametrize("beam", [1, 2, 4])
def test_a_path_above_one_half_is_found_by_any_beam(beam):
    """A labelling whose single path has probability > 1/2 keeps over half the mass in its
    prefixes at every frame, so no beam drops it (the decoder judge's rule)."""
    rng = np.random.default_rng(3)
    for _ in range(40):
        C = int(rng.integers(3, 6))
        target = tuple(int(k) for k in rng.integers(1, C, size=int(rng.integers(0, 4))))
        path = list(minimal_path(target)) + [0] * int(rng.integers(0, 3))
        x = rng.normal(size=(len(path), C))
        x[np.arange(len(path)), path] += 6.0
        lp = log_softmax(x)
        if path_score(lp, path) <= np.log(0.5):
            continue
        (labels, _), *_ = prefix_beam_search(lp, beam=beam, blank=0)
        assert labels == collapse(path) == target


def test_a_repeated_label_needs_a_blank_between():
    """Two frames certain of label 1: one label 1, since 1 1 collapses; 1 _ 1 spells (1, 1)."""
    certain = np.log(np.array([[1e-12, 1.0, 1e-12]] * 2))  # (T, C)
    assert prefix_beam_search(certain, beam=4)[0][0] == (1,)
    spelled = np.log(np.array([[1e-12, 1.0], [1.0, 1e-12], [1e-12, 1.0]]))
    assert prefix_beam_search(spelled, beam=4)[0][0] == (1, 1)


def test_no_frame_is_the_empty_labelling_and_an_impossible_frame_is_none():
    """T = 0: only the empty labelling, probability 1. A frame of -inf (or NaN) only: no
    labelling has a probability, as brute force finds none."""
    assert prefix_beam_search(np.zeros((0, 3)), beam=2) == [((), 0.0)]
    lp = log_softmax(np.random.default_rng(4).normal(size=(3, 3)))
    lp[1] = -np.inf
    assert labelling_logprobs(lp) == {}
    assert prefix_beam_search(lp, beam=prefix_count(3, 3)) == []
    lp[1] = np.nan
    assert prefix_beam_search(lp, beam=4) == []


def test_ties_keep_a_kept_prefix_then_the_lower_labels():
    """Uniform frames: one frame gives (), (1,) and (2,) a third each, listed by labels; a
    beam of 1 keeps () over its extensions at that tie, though after two frames (1,) and (2,)
    hold 3/9 each and () 1/9."""
    hyps = prefix_beam_search(np.log(np.full((1, 3), 1 / 3)), beam=3)
    assert [k for k, _ in hyps] == [(), (1,), (2,)]
    [(labels, score)] = prefix_beam_search(np.log(np.full((2, 3), 1 / 3)), beam=1)
    assert labels == () and score == pytest.approx(np.log(1 / 9), abs=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda: prefix_beam_search(np.zeros((2, 3)), beam=0), "beam: expected a positive integer"),
    (lambda: prefix_beam_search(np.zeros((2, 3)), beam=2, blank=3),
     r"blank: expected a class index in \[0, 3\), got 3"),
    (lambda: prefix_beam_search(np.zeros((2, 1, 3)), beam=2),
     r"log_probs: expected one sample's \(T, C\) array, got shape \(2, 1, 3\)"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises(ValueError, match=message):
        call()
