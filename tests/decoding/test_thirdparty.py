"""Third-party decoders and aligners against brute force over every path (T <= 5, C <= 4).

Their inputs are float32 numbers (log-probabilities rounded to float32, then held as float64),
so that a float32 framework sees exactly what the oracles see and 1e-6 is its own arithmetic.
Upstream behaviours that differ from the oracles are asserted as measured, citing the thread,
so that each test fails when upstream changes it. TensorFlow and Keras run in worker processes
(the adapters are isolated) and are never imported here: a missing one skips with the reason
the adapter gives (the package to install), where ``pytest.importorskip`` would import it.
"""
import importlib.util
import itertools
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

from ctcbench.core.ctcmath import collapse, log_softmax
from ctcbench.core.decoding import (best_path_score, labelling_logprob, labelling_logprobs,
                                    path_score, prefix_count)
from ctcbench.runtime.decoders import get_decoder
from ctcbench.runtime.protocol import BackendUnavailable

pytestmark = pytest.mark.usefixtures("one_thread")  # workers on one thread each

# name -> the import name it needs, importorskip'ed where the adapter runs in this process
IN_PROCESS = {"fast-ctc-beam": "fast_ctc_decode", "fast-ctc-viterbi": "fast_ctc_decode",
              "flashlight": "flashlight", "flashlight-logadd": "flashlight",
              "ctc-segmentation": "ctc_segmentation"}
# those in worker processes take seconds to start: their tests are long (tests/conftest.py)
WORKER_GREEDY = ["tf-greedy", "keras-jax-greedy", "keras-tf-greedy", "keras-torch-greedy"]
WORKER_EXACT_BEAM = ["tf-beam", "keras-tf-beam", "keras-torch-beam"]  # keras-jax-beam: alone
TOL = 1e-6  # float32 frameworks


@pytest.fixture(scope="module")
def decoders():
    """``load(name)``: the decoder ``name``, started once for the module (a skip naming the
    package when it cannot run here); every one started is closed afterwards."""
    started = {}

    def load(name):
        if name in IN_PROCESS:
            pytest.importorskip(IN_PROCESS[name])
        if name not in started:
            try:
                started[name] = get_decoder(name)
            except BackendUnavailable as exc:
                pytest.skip(f"needs decoder {name}: {exc}")
        return started[name]
    yield load
    with ThreadPoolExecutor() as pool:  # each worker takes seconds to exit: all at once
        list(pool.map(lambda decoder: decoder.close(), started.values()))


def _problems(count, seed):
    """``(lp (T, C), blank)``: T <= 5, C <= 4, every blank index, three sharpnesses."""
    rng = np.random.default_rng(seed)
    for _ in range(count):
        T, C = int(rng.integers(1, 6)), int(rng.integers(2, 5))
        blank = int(rng.integers(0, C))
        lp = log_softmax(rng.normal(size=(T, C)) * float(rng.choice([0.3, 1.0, 4.0])))
        yield lp.astype(np.float32).astype(np.float64), blank


def _top(probs):
    """The most probable labellings (ties within 1e-9) and their log-probability."""
    best = max(probs.values())
    return {k for k, v in probs.items() if v >= best - 1e-9}, best


def _beam(decoder, lp, blank):
    T, C = lp.shape
    return decoder.decode(lp[:, None, :], [T], blank=blank, beam=prefix_count(T, C))[0]


def test_greedy_is_the_collapsed_argmax_path(decoders):
    """Labels: B(argmax of each frame); no score, as declared."""
    _check_greedy(decoders("fast-ctc-viterbi"))


@pytest.mark.long
@pytest.mark.parametrize("name", WORKER_GREEDY)
def test_framework_greedy_is_the_collapsed_argmax_path(decoders, name):
    """Labels: B(argmax of each frame); score: the best path's log-probability."""
    _check_greedy(decoders(name))


def _check_greedy(decoder):
    assert decoder.traits.search == "greedy"
    for lp, blank in _problems(30, seed=10):
        [[h]] = decoder.decode(lp[:, None, :], [len(lp)], blank=blank)
        assert h.labels == collapse(lp.argmax(1).tolist(), blank=blank)
        if decoder.traits.score == "none":
            assert h.score is None
        else:
            assert decoder.traits.score == "path"
            assert h.score == pytest.approx(lp.max(1).sum(), abs=TOL)


def _check_exact_beam(decoder, count, seed):
    assert decoder.traits.exact_beam and decoder.traits.search == "beam"
    for lp, blank in _problems(count, seed):
        probs = labelling_logprobs(lp, blank=blank)
        best, top = _top(probs)
        hyps = _beam(decoder, lp, blank)
        assert hyps[0].labels in best
        for h in hyps:  # every hypothesis returned, scored as declared
            if decoder.traits.score == "none":
                assert h.score is None
            else:
                assert decoder.traits.score == "labelling"
                assert h.score == pytest.approx(probs[h.labels], abs=TOL)
        assert hyps[0].score is None or hyps[0].score == pytest.approx(top, abs=TOL)


@pytest.mark.parametrize("name", ["fast-ctc-beam", "flashlight-logadd"])
def test_exact_beam_returns_the_most_probable_labelling(decoders, name):
    """At a beam of prefix_count(T, C): the most probable labelling, scored log P (every
    hypothesis flashlight returns, the whole beam), or unscored (fast-ctc-decode)."""
    _check_exact_beam(decoders(name), 60, seed=11)


@pytest.mark.long
@pytest.mark.parametrize("name", WORKER_EXACT_BEAM)
def test_framework_exact_beam_returns_the_most_probable_labelling(decoders, name):
    """At a beam of prefix_count(T, C): the most probable labelling, scored log P."""
    _check_exact_beam(decoders(name), 30, seed=11)


@pytest.mark.long
def test_keras_jax_beam_returns_the_most_probable_labelling(decoders):
    """As above for keras' JAX beam search, which compiles its scan per shape (~3 s a call)."""
    _check_exact_beam(decoders("keras-jax-beam"), 12, seed=11)


def test_flashlight_without_log_add_is_a_best_path_beam(decoders):
    """torchaudio's default log_add=False merges a labelling's paths by max: at a full beam the
    first hypothesis is the best path's labelling, and every score is its labelling's best
    path (measured: to 1e-12, its sums are float64); it is not the most probable labelling
    where the two differ (counted: the decoder is not an exact beam, as declared)."""
    decoder = decoders("flashlight")
    assert decoder.traits.score == "path" and not decoder.traits.exact_beam
    differ = 0
    for lp, blank in _problems(40, seed=12):
        hyps = _beam(decoder, lp, blank)
        assert hyps[0].labels == collapse(lp.argmax(1).tolist(), blank=blank)
        for h in hyps:
            assert h.score == pytest.approx(best_path_score(lp, h.labels, blank=blank),
                                            abs=1e-12)
        differ += hyps[0].labels not in _top(labelling_logprobs(lp, blank=blank))[0]
    assert differ > 0


# -- tensorflow#9550: tf.compat.v1.nn.ctc_beam_search_decoder merges repeats twice -----------
# https://github.com/tensorflow/tensorflow/issues/9550 (open; a fix that removed the flag,
# https://github.com/tensorflow/tensorflow/pull/15586, was closed unmerged). TF 2's
# tf.nn.ctc_beam_search_decoder passes merge_repeated=False (tf-beam, exact above); TF 1's
# API still defaults to True. Measured on tensorflow-cpu 2.21.0: the beam finds the most
# probable labelling, then merges its adjacent repeats, and keeps the unmerged one's score.
def _merged(labels):
    return tuple(k for k, _ in itertools.groupby(labels))


@pytest.mark.long
def test_tf_beam_v1_merges_repeated_labels_a_second_time(decoders):
    decoder = decoders("tf-beam-v1")
    hit = 0
    for lp, blank in _problems(40, seed=13):
        probs = labelling_logprobs(lp, blank=blank)
        [best], top = _top(probs)
        [h] = _beam(decoder, lp, blank)
        assert h.labels == _merged(best)
        assert h.score == pytest.approx(top, abs=TOL)  # log P(best), not log P(h.labels)
        hit += h.labels != best
    assert hit > 0  # the problems hold repeats for it to merge


@pytest.mark.long
def test_tf_beam_v1_decodes_the_issues_a_a_blank_a_a_to_a(decoders):
    """The issue's example: a path "A A _ A A" (p = 0.95 a frame) is "A A" by CTC's map and
    the most probable labelling; TF 1's beam search answers "A" at any beam width."""
    p = np.full((5, 2), 0.05)
    p[np.arange(5), [0, 0, 1, 0, 0]] = 0.95
    lp = np.log(p).astype(np.float32).astype(np.float64)
    probs = labelling_logprobs(lp, blank=1)
    assert _top(probs)[0] == {(0, 0)}
    for beam in (1, 2, 100):
        [[h]] = decoders("tf-beam-v1").decode(lp[:, None, :], [5], blank=1, beam=beam)
        assert h.labels == (0,)
        [[right]] = decoders("tf-beam").decode(lp[:, None, :], [5], blank=1, beam=beam)
        assert right.labels == (0, 0) and right.score == pytest.approx(h.score, abs=TOL)
    assert h.score == pytest.approx(probs[(0, 0)], abs=TOL)


# -- TF's beam search normalises each frame with a float32 running sum ------------------------
# https://github.com/tensorflow/tensorflow/pull/21187 (merged; the fix of
# https://github.com/tensorflow/tensorflow/issues/6034) added the softmax's normaliser as a
# float accumulator, log(sum_j exp(x_j - max)) summed class by class. Measured on
# tensorflow-cpu 2.21.0: with many classes near probability 0, each added to a sum near 1 is
# rounded (those below half an ulp vanish), so log_probabilities exceed log P by the
# normalisers' error: 2.7e-4 at C = 2000, T = 60, under 5e-7 at C <= 4.
@pytest.mark.long
def test_tf_beam_float32_scores_carry_its_normalisers_rounding(decoders):
    rng = np.random.default_rng(17)
    T, C = 60, 2000
    logits = rng.normal(size=(T, C))
    logits[np.arange(T), rng.integers(0, C - 1, size=T)] += 16.0  # one path near certain
    lp = log_softmax(logits).astype(np.float32).astype(np.float64)
    [h] = decoders("tf-beam").decode(lp[:, None, :], [T], blank=C - 1, beam=8)[0]
    truth = labelling_logprob(lp, [h.labels], blank=C - 1)[0]
    x = lp.astype(np.float32)  # (T, C), the blank already last: TF's own order
    top = x.max(1, keepdims=True)
    running = np.cumsum(np.exp(x - top), axis=1, dtype=np.float32)[:, -1]  # class by class
    excess = -(np.log(running.astype(np.float64)) + top[:, 0] - np.log(np.exp(lp).sum(1))).sum()
    assert excess > 1e-4
    assert h.score - truth == pytest.approx(excess, abs=1e-6)


# -- ctc-segmentation: a state path of its own model, not a CTC alignment ---------------------
def _segmentation(lp, target, blank):
    """What ctc-segmentation 1.7.5 answers, by its model (arXiv:2007.09127; its
    ctc_segmentation_dyn.pyx and backtracking): states [start, blank, l1, ..., lL, blank] (no
    second blank for an empty target); the start state holds frame 0 and stays for free; a
    state is entered at a frame with its log-probability and stays at the best of the blank's
    and its own; the end is the last state's best frame. Backtracking names the entered
    states, scores the preamble's frames after frame 0 by the blank, frame 0 and the frames
    past the end by 0. Returns (path: entered class, else blank; the sum of those scores)."""
    states = [blank] + list(target) + ([blank] if len(target) else [])
    T, S = len(lp), len(states) + 1
    table = np.full((T, S), -np.inf)
    table[:, 0] = 0.0

    def moves(t, s):
        c = states[s - 1]
        return table[t - 1, s - 1] + lp[t, c], table[t - 1, s] + max(lp[t, blank], lp[t, c])
    for t in range(1, T):
        for s in range(1, S):
            table[t, s] = max(moves(t, s))
    t, s = int(np.argmax(table[:, -1])), S - 1
    path, gains = [blank] * T, np.zeros(T)
    while s > 0:
        enter, stay = moves(t, s)
        if enter >= stay:
            path[t], gains[t] = states[s - 1], lp[t, states[s - 1]]
            s -= 1
        else:
            gains[t] = max(lp[t, blank], lp[t, states[s - 1]])
        t -= 1
    gains[1:t + 1] = lp[1:t + 1, blank]
    return path, float(gains.sum())


def _targets(lp, blank):
    """Up to three labellings with a path in T frames and room for ctc-segmentation's start
    state and two blank states (len + 3 <= T)."""
    probs = labelling_logprobs(lp, blank=blank)
    fits = [k for k in sorted(probs, key=probs.get, reverse=True) if len(k) + 3 <= len(lp)]
    return fits[:3]


def test_ctc_segmentation_gives_its_own_models_state_path(decoders):
    """Its path and score are its model's (float32: 1e-5); frame 0 is always the start state
    (a blank here); the path collapses to the target where no label repeats; and it is no CTC
    alignment: its score is not the target's best path's on most problems (counted)."""
    aligner = decoders("ctc-segmentation")
    assert aligner.traits.role == "aligner" and aligner.traits.score == "none"
    checked = differ = 0
    for lp, blank in _problems(60, seed=14):
        for target in _targets(lp, blank):
            path, score = aligner.align(lp, target, blank=blank)
            want_path, want_score = _segmentation(lp, target, blank)
            assert list(path) == want_path and path[0] == blank
            assert score == pytest.approx(want_score, abs=1e-5)
            if _merged(target) == tuple(target):
                assert collapse(path, blank=blank) == tuple(target)
            differ += abs(score - best_path_score(lp, target, blank=blank)) > 1e-5
            checked += 1
    assert checked > 20 and differ > checked // 2


def test_ctc_segmentation_enters_a_repeated_label_on_consecutive_frames(decoders):
    """Its model has no blank between two equal labels: for target "a a" on frames peaked at
    "_ _ a a _ _" it enters a at frames 2 and 3, a path CTC's map reads as "a"; its score
    leaves out frame 0 and frame 5 (past the end), where a CTC path pays for a blank."""
    p = np.full((6, 3), 0.05)
    p[np.arange(6), [0, 0, 1, 1, 0, 0]] = 0.9
    lp = np.log(p).astype(np.float32).astype(np.float64)
    path, score = decoders("ctc-segmentation").align(lp, [1, 1], blank=0)
    assert list(path) == [0, 0, 1, 1, 0, 0] and collapse(path, blank=0) == (1,)
    assert score == pytest.approx(path_score(lp[1:5], path[1:5]), abs=1e-5)
    assert best_path_score(lp, [1, 1], blank=0) < score - 2  # a CTC path needs a blank


def test_ctc_segmentation_refuses_fewer_frames_than_its_states(decoders):
    """It needs len(target) + 3 frames (2 for an empty target) where CTC needs len(target):
    fewer is its AssertionError, raised as a ValueError naming the target."""
    aligner = decoders("ctc-segmentation")
    lp = log_softmax(np.random.default_rng(16).normal(size=(5, 3)))
    for T, target in [(4, [1, 2]), (3, [1]), (1, [])]:
        assert np.isfinite(best_path_score(lp[:T], target, blank=0))
        with pytest.raises(ValueError, match="Audio is shorter than text"):
            aligner.align(lp[:T], target, blank=0)
        path, _ = aligner.align(lp[:T + 1], target, blank=0)
        assert len(path) == T + 1


# -- every adapter: a ragged batch is each sample alone ---------------------------------------
@pytest.mark.parametrize("name", ["fast-ctc-beam", "fast-ctc-viterbi", "flashlight",
                                  "flashlight-logadd"])
def test_a_ragged_batch_decodes_each_sample_as_alone(decoders, name):
    """Padded frames hold NaN and are never read: each sample's hypotheses are its own."""
    _check_ragged(decoders(name))


@pytest.mark.long
@pytest.mark.parametrize("name", WORKER_GREEDY + WORKER_EXACT_BEAM + ["tf-beam-v1"])
def test_framework_ragged_batch_decodes_each_sample_as_alone(decoders, name):
    """As above, through the adapters that zero the padded frames for the framework."""
    _check_ragged(decoders(name))


def _check_ragged(decoder):
    rng = np.random.default_rng(15)
    lp = log_softmax(rng.normal(size=(5, 3, 4)) * 2).astype(np.float32).astype(np.float64)
    lp[3:, 1] = np.nan
    lp[1:, 2] = np.nan
    lengths = [5, 3, 1]
    batch = decoder.decode(lp, lengths, blank=2, beam=prefix_count(5, 4))
    for n, length in enumerate(lengths):
        [alone] = decoder.decode(lp[:length, n:n + 1], [length], blank=2,
                                 beam=prefix_count(5, 4))
        assert batch[n] == alone


def test_a_missing_package_names_the_extra_to_install(monkeypatch):
    """Construction decides availability with find_spec alone: a hidden package is
    BackendUnavailable naming it, with the extra that installs it."""
    real = importlib.util.find_spec
    hidden = {"fast_ctc_decode", "flashlight", "ctc_segmentation", "tensorflow", "keras"}
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in hidden else real(name, *a))
    for name, words, extra in [("fast-ctc-beam", "fast_ctc_decode", "decoders"),
                               ("flashlight", "flashlight", "decoders"),
                               ("ctc-segmentation", "ctc_segmentation", "decoders"),
                               ("tf-beam", "tensorflow", "tf"),
                               ("keras-torch-beam", "keras", "keras")]:
        with pytest.raises(BackendUnavailable, match=words) as err:
            get_decoder(name)
        assert err.value.hint == f"pip install 'ctcbench[{extra}]'"
