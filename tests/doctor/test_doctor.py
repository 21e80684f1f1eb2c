"""ctcbench.doctor.diagnose: each finding fires on the mistake it names and never on
well-formed inputs; evidence numbers are checked against closed forms (ctcbench.core.oracles)."""
from __future__ import annotations

import math

import numpy as np
import pytest

import ctcbench
from ctcbench import CTCProblem
from ctcbench.doctor.diagnose import diagnose
from ctcbench.core.ctcmath import log_softmax
from ctcbench.core.oracles import uniform_loss

from conftest import random_problem, spike_paths, trained_log_probs

# docs/doctor.md: the reduction note is for reduction="mean" over target lengths that differ >= 10x
# (torch's mean divides each loss by its target length, clamped to 1, so a label of the shortest
# sample weighs max/min times one of the longest).
NOTED_LENGTH_RATIO = 10


def _problem(rng, *, T=60, N=8, C=12, L=6, blank=0, full_length=True):
    return random_problem(rng, T=T, N=N, C=C, L=L, blank=blank, full_length=full_length,
                          garbage=False)


def _diagnose(p: CTCProblem, values=None, *, kind="log_probs", **kw):
    values = trained_log_probs(np.random.default_rng(0), p) if values is None else values
    kw.setdefault("blank", p.blank)
    return diagnose(**{kind: values}, targets=p.targets, input_lengths=p.input_lengths,
                    target_lengths=p.target_lengths, **kw)


def _problems(p: CTCProblem) -> set[str]:
    """Codes of the warnings and errors (info notes are conventions, not problems)."""
    return {f.code for f in p.findings if f.severity != "info"}


# -- no false positives ---------------------------------------------------------------------------
@pytest.mark.parametrize("seed", range(12))
def test_well_formed_inputs_come_back_clean(seed):
    """Random, untrained-like, near-uniform and trained-like (peaked) well-formed inputs of many
    shapes, blanks and dtypes give no warning or error; only the documented reduction note."""
    rng = np.random.default_rng(seed)
    for _ in range(25):
        T, N, C = int(rng.integers(1, 150)), int(rng.integers(1, 16)), int(rng.integers(2, 50))
        blank = int(rng.choice([0, C - 1]))
        p = random_problem(rng, T=T, N=N, C=C, L=int(rng.integers(1, min(T, 25) + 1)),
                           blank=blank, full_length=bool(rng.integers(2)))
        dtype = rng.choice([np.float32, np.float64])
        for values in (p.log_probs(), log_softmax(p.clean_logits() * 0.01),
                       trained_log_probs(rng, p), trained_log_probs(rng, p, peak=4, noise=0.5)):
            values = np.where(p.frame_mask[..., None], values, np.nan).astype(dtype)
            report = _diagnose(p, values)
            assert _problems(report) == set(), (T, N, C, blank, report)
            assert set(report.codes) <= {"reduction"}, (T, N, C, blank, report)
            per_label = 1 / np.maximum(p.target_lengths, 1)  # torch's mean weight per label
            ratio = per_label.max() / per_label.min()
            assert ("reduction" in report.codes) == (N > 1 and ratio >= NOTED_LENGTH_RATIO)
            assert report.ok


def test_trained_model_with_long_inputs_is_not_blank_collapse(rng):
    """T >> L: a healthy model predicts blank on ~97% of frames; that is not the plateau."""
    p = _problem(rng, T=300, N=16, C=30, L=8)
    report = _diagnose(p, trained_log_probs(rng, p))
    assert report.codes == []
    assert "no problems found" in str(report)


def test_logits_and_probs_inputs_of_a_healthy_model_are_clean(rng):
    """The same healthy model passed as logits (any offset) or as probabilities is clean."""
    p = _problem(rng)
    lp = trained_log_probs(rng, p)
    assert _problems(_diagnose(p, lp + 3.0, kind="logits")) == set()
    assert _problems(_diagnose(p, np.exp(lp), kind="probs")) == set()


def test_torch_tensors_with_grad_are_accepted(rng):
    """diagnose takes torch tensors straight from a training loop (requires_grad, float32)."""
    import torch
    p = _problem(rng)
    lp = torch.tensor(trained_log_probs(rng, p), dtype=torch.float32, requires_grad=True)
    report = ctcbench.diagnose(lp, targets=torch.tensor(p.targets),
                               input_lengths=torch.tensor(p.input_lengths),
                               target_lengths=torch.tensor(p.target_lengths))
    assert report.ok and report.summary["dtype"] == "float32"


# -- normalisation --------------------------------------------------------------------------------
def test_raw_logits_as_log_probs_are_not_normalized_with_closed_form_losses(rng):
    """Constant raw scores c: the loss as given is uniform_loss - T log C - T c (negative for
    c > 0) and after log_softmax exactly uniform_loss; both reported as evidence."""
    p = _problem(rng, T=20, N=4, C=5, L=4)
    c = 2.0
    report = _diagnose(p, np.full((20, 4, 5), c))
    codes = _problems(report)
    assert "not-normalized" in codes and "probabilities-not-log" not in codes
    ev = report.findings[0].evidence
    uniform = [uniform_loss(20, 5, p.targets[n, : p.target_lengths[n]]) for n in range(4)]
    assert ev["mean_loss_after_log_softmax"] == pytest.approx(np.mean(uniform), abs=1e-3)
    assert ev["mean_loss_as_given"] == pytest.approx(np.mean(uniform) - 20 * math.log(5) - 20 * c,
                                                     abs=1e-3)
    assert ev["row_sum_min"] == pytest.approx(5 * math.exp(c), rel=1e-3)


def test_trained_model_logits_without_log_softmax_are_not_normalized(rng):
    """A trained model's raw logits passed as log_probs: not-normalized, ranked first."""
    p = _problem(rng)
    raw = trained_log_probs(rng, p) + rng.normal(size=(60, 8, 1)) * 3  # per-frame offsets
    report = _diagnose(p, raw)
    assert report.findings[0].code == "not-normalized"
    assert _problems(report) == {"not-normalized"}


def test_softmax_output_passed_as_log_probs(rng):
    """Probabilities (softmax output) where log-probs are expected: probabilities-not-log."""
    p = _problem(rng)
    report = _diagnose(p, np.exp(trained_log_probs(rng, p)))
    assert _problems(report) == {"probabilities-not-log"}
    assert not report.ok


def test_softmax_output_passed_as_logits_is_a_double_softmax(rng):
    """Probabilities passed as logits (softmax applied twice) are named too."""
    p = _problem(rng)
    report = _diagnose(p, np.exp(trained_log_probs(rng, p)), kind="logits")
    assert _problems(report) == {"probabilities-not-log"}
    assert "twice" in report.findings[0].message


def test_probs_that_are_log_probs_are_not_normalized(rng):
    """Log-probs passed as probs= are not a distribution: not-normalized says what they are."""
    p = _problem(rng)
    report = _diagnose(p, trained_log_probs(rng, p), kind="probs")
    assert _problems(report) == {"not-normalized"}
    assert "log-probabilities" in report.findings[0].message


def test_nan_in_valid_frames_is_non_finite_but_padding_may_hold_nan(rng):
    """NaN inside input_lengths is an error; NaN past them (padding) is fine."""
    p = _problem(rng, full_length=False)
    lp = trained_log_probs(rng, p)  # NaN on padded frames
    assert _problems(_diagnose(p, lp)) == set()
    lp[0, 0, 1] = np.nan
    report = _diagnose(p, lp)
    assert "non-finite" in report.codes and report.findings[0].evidence["samples"] == [0]


# -- layout and lengths ---------------------------------------------------------------------------
def test_batch_major_passed_as_time_major_is_layout(rng):
    """(N, T, C) where (T, N, C) is expected: layout, and the rest is diagnosed transposed."""
    p = _problem(rng)
    report = _diagnose(p, trained_log_probs(rng, p).transpose(1, 0, 2))
    assert _problems(report) == {"layout"}
    assert report.summary["layout"].startswith("NTC")


def test_layout_ntc_declared_accepts_batch_major(rng):
    """layout='NTC' says the values are batch-major on purpose: no layout finding."""
    p = _problem(rng)
    report = _diagnose(p, trained_log_probs(rng, p).transpose(1, 0, 2), layout="NTC")
    assert _problems(report) == set()


def test_input_lengths_past_t_are_length_mismatch_with_the_ratio(rng):
    """input_lengths 1.5x the output's T (no whole factor, so no downsampling named):
    length-mismatch with the ratio."""
    p = _problem(rng, T=40)
    lengths = p.input_lengths.copy()
    lengths[0] = 60
    report = diagnose(trained_log_probs(rng, p), targets=p.targets,
                      input_lengths=lengths, target_lengths=p.target_lengths)
    assert _problems(report) == {"length-mismatch"}
    assert report.findings[0].evidence["ratio_to_T"] == pytest.approx(1.5)


def test_infeasible_targets_name_samples_and_deficit(rng):
    """Targets needing more frames than the input has: which samples, short by how much
    (frames needed counted by hand: labels plus adjacent repeats), and zero_infinity in the fix."""
    p = _problem(rng, T=30, N=4, C=6, L=4)
    targets = np.array([[1, 1, 2, 2], [1, 2, 3, 4], [3, 3, 3, 3], [5, 4, 3, 2]])
    lengths = np.array([3, 30, 5, 30])
    report = diagnose(trained_log_probs(rng, p), targets=targets, input_lengths=lengths,
                      target_lengths=np.array([4, 4, 4, 4]))
    assert _problems(report) == {"infeasible-target"}
    finding = report.findings[0]
    # needs 4 + 2 = 6, 4, 4 + 3 = 7, 4 frames; has 3, 30, 5, 30
    expected = [(0, 3), (2, 2)]
    assert [(d["sample"], d["short_by"]) for d in finding.evidence["samples"]] == expected
    assert "zero_infinity" in finding.fix


# -- targets and blank ----------------------------------------------------------------------------
def test_target_equal_to_blank_is_target_contains_blank(rng):
    """A label equal to the blank index is named with its position."""
    p = _problem(rng, C=12)
    targets = p.targets.copy()
    targets[2, 0] = 0
    report = diagnose(trained_log_probs(rng, p), targets=targets, input_lengths=p.input_lengths,
                      target_lengths=np.maximum(p.target_lengths, 1))
    assert _problems(report) == {"target-contains-blank"}
    assert [2, 0] in report.findings[0].evidence["positions"]


def test_target_label_past_the_classes_is_out_of_range(rng):
    """A label >= C (vocabulary without a blank slot) is target-out-of-range."""
    p = _problem(rng, C=12)
    targets = p.targets.copy()
    targets[1, 0] = 12
    report = diagnose(trained_log_probs(rng, p), targets=targets, input_lengths=p.input_lengths,
                      target_lengths=np.maximum(p.target_lengths, 1))
    assert _problems(report) == {"target-out-of-range"}


def test_keras_blank_at_last_class_with_torch_loss_is_blank_index(rng):
    """A model trained with blank = C-1 (Keras) scored with blank = 0: blank-index, with the
    loss under each convention, and it explains the 'blank' labels in the targets."""
    C = 12
    p = _problem(rng, C=C, blank=C - 1)  # labels 0..C-2, model blank C-1
    lp = trained_log_probs(rng, p)
    report = diagnose(lp, targets=p.targets, input_lengths=p.input_lengths,
                      target_lengths=p.target_lengths, blank=0)
    assert report.findings[0].code == "blank-index"
    ev = report.findings[0].evidence
    assert ev["model_blank"] == C - 1 and ev[f"mean_loss_blank_{C - 1}"] < ev["mean_loss_blank_0"]
    assert _problems(report) <= {"blank-index", "target-contains-blank"}
    if "target-contains-blank" in report.codes:
        assert report.findings[0].explains == ["target-contains-blank"]


def test_torch_blank_model_scored_with_keras_blank_is_blank_index(rng):
    """The other way round: model blank 0, loss blank C-1."""
    p = _problem(rng, C=10)
    report = _diagnose(p, blank=9)
    assert report.findings[0].code == "blank-index"
    assert report.findings[0].evidence["model_blank"] == 0


def test_untrained_model_favouring_the_last_class_is_not_blank_index(rng):
    """At initialisation one class can win every argmax by a hair (p ~ 1/C): that is no
    evidence of a blank convention, even if the loss is a little lower with it as blank."""
    p = _problem(rng, C=12)
    logits = rng.normal(size=(60, 8, 12)) * 0.05
    logits[..., 11] += 0.3
    assert _problems(_diagnose(p, logits, kind="logits")) == set()


# -- model states ---------------------------------------------------------------------------------
def test_blank_plateau_is_blank_collapse_with_shares(rng):
    """Blank on every frame (with noise) while targets are not empty: blank-collapse warning
    with the emitted/target label counts."""
    p = _problem(rng, T=40, N=8, C=15, L=6)
    paths = np.zeros((40, 8), dtype=np.int64)
    report = _diagnose(p, trained_log_probs(rng, p, paths=paths, peak=6))
    assert _problems(report) == {"blank-collapse"}
    finding = report.findings[0]
    assert finding.severity == "warning" and report.ok
    assert finding.evidence["emitted_labels"] == 0
    assert finding.evidence["target_labels"] == int(p.target_lengths[p.target_lengths > 0].sum())
    assert "learning rate" in finding.fix


def test_constant_blank_output_is_blank_collapse_only(rng):
    """The same blank-heavy frame for every input and step is the plateau, not time-invariance."""
    p = _problem(rng)
    frame = log_softmax(np.r_[5.0, np.zeros(11)])
    report = _diagnose(p, np.broadcast_to(frame, (60, 8, 12)).copy())
    assert _problems(report) == {"blank-collapse"}


def test_captcha_crnn_repeating_one_feature_vector_is_time_invariant(rng):
    """Seed 002: one CNN feature vector per image copied to every step of an RNN (which settles
    over the first steps), T = 2 x max captcha length: time-invariant, ranked first."""
    N, C, T, F = 16, 64, 8, 32
    features = rng.normal(size=(N, F))  # (N, F): one pooled vector per image
    weights = rng.normal(size=(F, C)) * 0.5
    settle = 1 - 0.5 ** (np.arange(T) + 1)  # (T,) hidden state approaching its fixed point
    logits = settle[:, None, None] * (features @ weights)[None]  # (T, N, C)
    targets = rng.integers(1, C, size=(N, 4))
    report = diagnose(logits=logits, targets=targets, input_lengths=np.full(N, T),
                      target_lengths=np.full(N, 4))
    assert report.findings[0].code == "time-invariant"
    assert _problems(report) == {"time-invariant"}
    assert report.findings[0].evidence["time_variance_share"] < 0.1


@pytest.mark.parametrize("noise", [0.0, 0.05])
def test_single_sample_with_repeated_frames_is_time_invariant(rng, noise):
    """N = 1: the same frame (argmax a label) at every step, exactly or with small noise."""
    logits = rng.normal(size=9) + np.r_[0, 3, np.zeros(7)] + rng.normal(size=(20, 1, 9)) * noise
    report = diagnose(logits=logits, targets=np.array([[1, 2, 3]]),
                      input_lengths=np.array([20]), target_lengths=np.array([3]))
    assert _problems(report) == {"time-invariant"}


def test_mean_reduction_over_very_different_target_lengths_is_noted(rng):
    """reduction='mean' with target lengths 1 and 30: an info note; 'sum' is not noted."""
    T, C = 80, 20
    targets = np.zeros((2, 30), dtype=np.int64)
    targets[0, 0] = 3
    targets[1] = rng.integers(1, C, size=30)
    kw = dict(targets=targets, input_lengths=np.array([T, T]), target_lengths=np.array([1, 30]))
    p = CTCProblem(np.zeros((T, 2, C)), targets, kw["input_lengths"], kw["target_lengths"])
    lp = trained_log_probs(rng, p)
    report = diagnose(lp, **kw)
    assert report.codes == ["reduction"] and report.findings[0].severity == "info"
    assert "no problems found (notes below)" in str(report)
    assert report.findings[0].evidence["weight_ratio"] == 30
    assert diagnose(lp, **kw, reduction="sum").codes == []


@pytest.mark.parametrize("lengths, weight_ratio", [
    ([1, 10], 10),  # a label of the 1-label sample weighs 10 of the 10-label one's: noted
    ([1, 9], None),  # 9x: not yet
    ([2, 19], None),  # 9.5x
    ([2, 20], 10),
    ([3, 12, 30], 10),  # the extremes count, not the neighbours
    ([0, 10], 10),  # an empty target divides by 1, as torch clamps it
    ([0, 9], None),
    ([7, 7, 7], None),
])
def test_reduction_note_fires_from_a_tenfold_weight_per_label(rng, lengths, weight_ratio):
    """With reduction='mean', per label the shortest target weighs max/min (lengths clamped
    to 1) times the longest: noted from 10x on, with that ratio as evidence, never below;
    'sum' and a single sample are never noted."""
    T, C, N = 40, 12, len(lengths)
    targets = np.zeros((N, max(lengths)), dtype=np.int64)
    for n, length in enumerate(lengths):
        targets[n, :length] = 1 + np.arange(length) % (C - 1)  # no blank, no adjacent repeat
    lengths = np.array(lengths)
    p = CTCProblem(np.zeros((T, N, C)), targets, np.full(N, T), lengths)
    kw = dict(targets=targets, input_lengths=np.full(N, T), target_lengths=lengths)
    lp = trained_log_probs(rng, p)
    notes = [f for f in diagnose(lp, **kw).findings if f.code == "reduction"]
    if weight_ratio is None:
        assert notes == []
    else:
        assert len(notes) == 1 and notes[0].evidence["weight_ratio"] == weight_ratio
    assert "reduction" not in diagnose(lp, **kw, reduction="sum").codes
    assert "reduction" not in diagnose(lp[:, :1], **{k: v[:1] for k, v in kw.items()}).codes


# -- FSDL story and ranking -----------------------------------------------------------------------
def test_fsdl_softmax_perfect_prediction_is_named(rng):
    """Seed 000: a 'perfect' one-hot softmax prediction fed as log_probs is diagnosed as
    probabilities-not-log (the mistake that makes all-blank score better)."""
    p = _problem(rng, T=50, N=4, C=20, L=5)
    onehot = np.eye(20)[spike_paths(p)]  # (T, N, C)
    report = _diagnose(p, onehot)
    assert report.findings[0].code == "probabilities-not-log"


def test_several_mistakes_are_all_found_and_ranked(rng):
    """Batch-major raw logits with one infeasible target: layout first, then not-normalized,
    then infeasible-target."""
    targets = np.array([[1, 2, 3], [4, 5, 6], [7, 1, 2], [3, 4, 5]])
    lengths = np.array([2, 30, 30, 30])  # sample 0 needs 3 frames
    p = CTCProblem(np.zeros((30, 4, 8)), targets, np.full(4, 30), np.full(4, 3))
    raw = trained_log_probs(rng, p) + 5.0
    report = diagnose(raw.transpose(1, 0, 2), targets=targets, input_lengths=lengths,
                      target_lengths=np.full(4, 3))
    assert report.codes[:3] == ["layout", "not-normalized", "infeasible-target"]


# -- input validation -----------------------------------------------------------------------------
@pytest.mark.parametrize("kwargs, message", [
    (dict(log_probs=np.zeros((5, 2))), "log_probs: expected a 3-D array"),
    (dict(log_probs=np.zeros((5, 3, 4))), "log_probs: expected a batch axis of size N = 2"),
    (dict(log_probs=np.zeros((5, 2, 4)), logits=np.zeros((5, 2, 4))), "exactly one of them"),
    (dict(log_probs=np.zeros((5, 2, 4), dtype=np.int64)), "log_probs: expected a float array"),
    (dict(log_probs=np.zeros((5, 2, 4)), blank=4), "blank: expected an index in [-4, 4)"),
    (dict(log_probs=np.zeros((5, 2, 4)), reduction="avg"), "reduction: expected one of"),
    (dict(log_probs=np.zeros((5, 2, 4)), input_lengths=np.array([5, -1])),
     "input_lengths: expected non-negative values"),
    (dict(log_probs=np.zeros((5, 2, 4)), targets=np.array([1, 2, 3])),
     "targets: expected a concatenated 1-D array of length sum(target_lengths) = 2"),
])
def test_malformed_inputs_raise_expected_x_got_y(kwargs, message):
    """Inputs that cannot be diagnosed get one 'name: expected X, got Y' error."""
    base = dict(targets=np.array([[1], [2]]), input_lengths=np.array([5, 5]),
                target_lengths=np.array([1, 1]))
    base.update(kwargs)
    with pytest.raises(ValueError) as err:
        diagnose(**base)
    assert message in str(err.value)


def test_plateau_over_a_large_vocabulary_is_blank_collapse(rng):
    """C = 1000: blank at p ~ 0.3 is still the plateau when it wins every frame by far."""
    p = _problem(rng, T=40, N=4, C=1000, L=5)
    logits = rng.normal(size=(40, 4, 1000)) * 0.1
    logits[..., 0] += 6
    report = _diagnose(p, log_softmax(logits))
    assert _problems(report) == {"blank-collapse"}
    assert report.findings[0].evidence["mean_blank_prob"] < 0.5


def test_constant_uniform_output_is_neither_time_invariant_nor_blank_collapse(rng):
    """Exactly uniform frames (the closed-form baseline, or all-zero logits) carry no
    information: no time-invariance, and argmax ties are not a blank plateau."""
    p = _problem(rng)
    assert _problems(_diagnose(p, np.zeros((60, 8, 12)), kind="logits")) == set()
    assert _problems(_diagnose(p, np.full((60, 8, 12), -np.log(12)))) == set()


@pytest.mark.parametrize("L", [1, 2, 4])
def test_steady_per_sample_background_with_label_spikes_is_not_time_invariant(rng, L):
    """T >> L, each sample with its own steady background and only small per-frame noise:
    time explains little variance, but the label spikes make it a healthy model."""
    p = random_problem(rng, T=200, N=12, C=20, L=L, full_length=True, garbage=False)
    logits = rng.normal(size=(1, 12, 20)) * 3 + rng.normal(size=(200, 12, 20)) * 0.05
    logits[np.arange(200)[:, None], np.arange(12)[None], spike_paths(p)] += 12
    assert _problems(_diagnose(p, log_softmax(logits))) == set()


def test_single_perfectly_decoded_sample_is_not_time_invariant():
    """N = 1, a confident model whose greedy path is blank, 3, blank..., 2, blank (its target
    [3, 2] by construction): the middle frames are all blank, but the sample moves."""
    C, T = 5, 12
    p = np.full((T, 1, C), 0.01)
    p[:, 0, 0] = 0.96
    p[1, 0, :], p[9, 0, :] = 0.01, 0.01
    p[1, 0, 3], p[9, 0, 2] = 0.96, 0.96
    report = diagnose(np.log(p), targets=np.array([[3, 2]]), input_lengths=np.array([T]),
                      target_lengths=np.array([2]))
    assert _problems(report) == set(), report


@pytest.mark.parametrize("seed", range(10))
@pytest.mark.parametrize("frames", [(2, 4, 37), (1,)])
def test_single_sample_with_label_spikes_and_small_noise_is_not_time_invariant(seed, frames):
    """N = 1, C = 30, T = 40: one-frame label spikes (at the edges: the middle half is all blank)
    on confident blanks with logit noise <= 0.05 decode exactly to the target: no finding
    (one label changes the argmax only twice; its greedy output is what clears it)."""
    rng = np.random.default_rng(seed)
    T, C = 40, 30
    target = rng.choice(np.arange(1, C), size=len(frames), replace=False)
    logits = rng.uniform(-0.05, 0.05, size=(T, 1, C))
    logits[:, 0, 0] += 10
    logits[list(frames), 0, target] += 20
    report = diagnose(logits=logits, targets=target[None], input_lengths=np.array([T]),
                      target_lengths=np.array([len(frames)]))
    assert _problems(report) == set(), report


def test_argmax_on_target_labels_is_no_evidence_of_another_blank():
    """C = 3, every frame puts 0.95 on its own target label (T = L = 8, targets 2,1,2,1,...):
    class 2 = C-1 wins half the frames only as a label, so there is no blank-index finding."""
    C, T, N = 3, 8, 6
    target = np.array([2, 1] * 4)
    p = np.full((T, N, C), 0.025)
    p[np.arange(T), :, target] = 0.95
    report = diagnose(np.log(p), targets=np.tile(target, (N, 1)), input_lengths=np.full(N, T),
                      target_lengths=np.full(N, T))
    assert "blank-index" not in report.codes and report.ok, report


def test_blank_index_that_no_loss_can_confirm_is_only_a_note(rng):
    """A Keras-trained model (blank C-1) scored with blank 0, where every sample holds label 0:
    no sample has a loss under both blanks, so blank-index is at most an info note (the
    label equal to the blank is still an error)."""
    C = 12
    p = _problem(rng, C=C, blank=C - 1)
    targets, target_lengths = p.targets.copy(), np.maximum(p.target_lengths, 1)
    targets[:, 0] = 0
    p = CTCProblem(p.logits, targets, p.input_lengths, target_lengths, blank=C - 1)
    report = diagnose(trained_log_probs(rng, p), targets=targets,
                      input_lengths=p.input_lengths, target_lengths=target_lengths, blank=0)
    assert _problems(report) == {"target-contains-blank"}, report
    notes = [f for f in report.findings if f.code == "blank-index"]
    assert len(notes) == 1 and notes[0].severity == "info"
    assert notes[0].evidence["samples_scored_under_both"] == 0


def test_blank_as_a_torch_scalar_tensor_is_the_same_blank(rng):
    """blank=torch.tensor(C-1) is read as the int C-1: a healthy blank-(C-1) model is clean,
    and blank=torch.tensor(0) flags it exactly as blank=0 does."""
    import torch
    C = 10
    p = _problem(rng, C=C, blank=C - 1)
    lp = trained_log_probs(rng, p)
    assert _problems(_diagnose(p, lp, blank=torch.tensor(C - 1))) == set()
    assert _diagnose(p, lp, blank=torch.tensor(0)).codes == _diagnose(p, lp, blank=0).codes
    assert _diagnose(p, lp, blank=torch.tensor(0)).summary["blank"] == 0


def test_negative_blank_means_the_same_class_as_in_the_api():
    """doctor takes blank=-1 as C-1, as CTCProblem does: the same report as blank=C-1, and a
    target holding class C-1 is flagged as a label equal to the blank either way."""
    rng = np.random.default_rng(3)
    log_probs = log_softmax(rng.normal(size=(12, 3, 5)))
    args = dict(targets=np.array([[1, 2], [2, 4], [1, 1]]), input_lengths=[12, 10, 9],
                target_lengths=[2, 2, 2])
    minus, last = diagnose(log_probs, blank=-1, **args), diagnose(log_probs, blank=4, **args)
    assert minus.to_dict() == last.to_dict()
    assert "target-contains-blank" in [f.code for f in minus.findings]
