"""ctcbench's own decoders and aligner against brute force over every path."""
import itertools

import numpy as np
import pytest

from ctcbench.core.ctcmath import collapse, log_softmax
from ctcbench.core.decoding import (best_path_score, labelling_logprob, labelling_logprobs,
                                    prefix_count)
from ctcbench.runtime.decoders import get_decoder


def _problems(count, seed=0):
    rng = np.random.default_rng(seed)
    for _ in range(count):
        T, C = int(rng.integers(1, 6)), int(rng.integers(2, 4))
        blank = int(rng.integers(0, C))
        scale = float(rng.choice([0.3, 1.0, 4.0]))
        yield log_softmax(rng.normal(size=(T, C)) * scale), blank


def _brute_paths(lp, blank):
    T, C = lp.shape
    for path in itertools.product(range(C), repeat=T):
        yield path, collapse(path, blank=blank), float(lp[np.arange(T), list(path)].sum())


def test_brute_force_labellings_sum_to_one():
    for lp, blank in _problems(30):
        total = np.logaddexp.reduce(list(labelling_logprobs(lp, blank=blank).values()))
        assert total == pytest.approx(0.0, abs=1e-12)


def test_exact_beam_scores_every_labelling():
    beam = get_decoder("beam")
    for lp, blank in _problems(40, seed=1):
        T, C = lp.shape
        probs = labelling_logprobs(lp, blank=blank)
        hyps = beam.decode(lp[:, None, :], [T], blank=blank, beam=prefix_count(T, C))[0]
        assert {h.labels for h in hyps} == set(probs)
        for h in hyps:
            assert h.score == pytest.approx(probs[h.labels], abs=1e-12)
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)


def test_reference_scores_agree_with_brute_force():
    for lp, blank in _problems(30, seed=2):
        probs = labelling_logprobs(lp, blank=blank)
        got = labelling_logprob(lp, list(probs), blank=blank)
        np.testing.assert_allclose(got, list(probs.values()), atol=1e-12)


def test_greedy_is_the_collapsed_argmax_path():
    greedy = get_decoder("greedy")
    for lp, blank in _problems(30, seed=3):
        best = max(_brute_paths(lp, blank), key=lambda p: p[2])
        [[h]] = greedy.decode(lp[:, None, :], [len(lp)], blank=blank)
        assert h.labels == best[1]
        assert h.score == pytest.approx(best[2], abs=1e-12)


def test_viterbi_finds_a_best_path_of_the_target():
    viterbi = get_decoder("viterbi")
    for lp, blank in _problems(30, seed=4):
        best = {}
        for path, lab, score in _brute_paths(lp, blank):
            best[lab] = max(best.get(lab, -np.inf), score)
        for lab, score in list(best.items())[:4]:
            path, got = viterbi.align(lp, lab, blank=blank)
            assert collapse(path, blank=blank) == lab and len(path) == len(lp)
            assert got == pytest.approx(score, abs=1e-12)
            assert lp[np.arange(len(lp)), path].sum() == pytest.approx(score, abs=1e-12)
            assert best_path_score(lp, lab, blank=blank) == pytest.approx(score, abs=1e-12)


def test_batch_lengths_and_padding_are_respected():
    rng = np.random.default_rng(5)
    lp = log_softmax(rng.normal(size=(5, 2, 3)))
    lp[3:, 1] = np.nan  # padded frames of sample 1 are never read
    beam = get_decoder("beam")
    hyps = beam.decode(lp, [5, 3], blank=0, beam=prefix_count(5, 3))
    probs = labelling_logprobs(lp[:3, 1], blank=0)
    assert {h.labels: round(h.score, 9) for h in hyps[1]} == {
        k: round(v, 9) for k, v in probs.items()}


def test_viterbi_refuses_a_target_with_no_path():
    with pytest.raises(ValueError, match="target: expected one with a path of 2 frames"):
        get_decoder("viterbi").align(log_softmax(np.zeros((2, 3))), [1, 1], blank=0)
