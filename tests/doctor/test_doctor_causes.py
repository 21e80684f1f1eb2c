"""ctcbench.doctor: mistakes from real reports named by cause, each on a healthy batch given
exactly that fault; healthy batches in legal but less common conventions stay clean of them."""
from __future__ import annotations

import numpy as np
import pytest

from ctcbench import CTCProblem
from ctcbench.core.ctcmath import log_softmax
from ctcbench.doctor.diagnose import diagnose

from conftest import random_problem, spike_paths, trained_log_probs

CAUSES = {"onehot-targets", "targets-transposed", "lengths-swapped", "target-lengths-padded",
          "half-precision", "softmax-axis", "argmax-outputs", "padded-frames-counted"}


def _healthy(rng, *, T=60, N=8, C=12, L=6, blank=0, full_length=False):
    """A healthy batch: every sample 2..L labels (blank-padded), 2L+2..T frames, trained-like
    log-probs (NaN past each input length)."""
    labels = np.array([c for c in range(C) if c != blank])
    targets = rng.choice(labels, size=(N, L))
    target_lengths = rng.integers(2, L + 1, size=N)
    targets[np.arange(L)[None] >= target_lengths[:, None]] = blank
    input_lengths = np.full(N, T) if full_length else rng.integers(2 * L + 2, T + 1, size=N)
    p = CTCProblem(np.zeros((T, N, C)), targets, input_lengths, target_lengths, blank=blank)
    return p, trained_log_probs(rng, p)


def _mask(p):
    return np.arange(p.targets.shape[1])[None] < p.target_lengths[:, None]


def _args(p, **kw):
    args = dict(targets=p.targets, input_lengths=p.input_lengths,
                target_lengths=p.target_lengths, blank=p.blank)
    return args | kw


def _problems(report) -> set[str]:
    return {f.code for f in report.findings if f.severity != "info"}


def test_onehot_targets_are_named_and_the_rest_diagnosed_with_their_labels(rng):
    """(N, L, C) float one-hot targets (Keras habit; padding rows of zeros): onehot-targets,
    first, and nothing else, as their argmax labels are the healthy targets."""
    p, lp = _healthy(rng)
    onehot = np.eye(12, dtype=np.float32)[p.targets]  # (N, L, C)
    onehot[~_mask(p)] = 0
    report = diagnose(lp, **_args(p, targets=onehot))
    assert report.codes[0] == "onehot-targets" and _problems(report) == {"onehot-targets"}
    assert report.findings[0].evidence["one_hot_rows"] == int(_mask(p).sum())
    assert "argmax(-1)" in report.findings[0].fix


def test_probability_targets_are_named_soft(rng):
    """Label-smoothed (N, L, C) targets are probability targets, named as such."""
    p, lp = _healthy(rng)
    soft = np.eye(12)[p.targets] * 0.9 + 0.1 / 12
    report = diagnose(lp, **_args(p, targets=soft))
    assert report.codes[0] == "onehot-targets" and "probability (soft)" in report.findings[0].message


@pytest.mark.parametrize("dim", [1, 0])
def test_log_softmax_over_the_batch_or_time_axis_is_named_with_that_axis(rng, dim):
    """log_softmax(dim=1) over (T, N, C) normalises over the batch, dim=0 over time: the finding
    names the axis, and the evidence shows sums of 1 along it (by construction)."""
    p, _ = _healthy(rng, full_length=True)
    logits = rng.normal(size=(60, 8, 12)) * 2
    wrong = logits - np.log(np.exp(logits).sum(dim, keepdims=True))
    report = diagnose(wrong, **_args(p))
    assert report.codes[0] == "softmax-axis" and "not-normalized" not in report.codes
    ev = report.findings[0].evidence
    name = "batch" if dim == 1 else "time"
    assert ev["axis"] == name and ev["dim"] == dim
    assert ev[f"sum_over_{name}_min"] == pytest.approx(1) == ev[f"sum_over_{name}_max"]


def test_softmax_over_the_batch_passed_as_log_probs_names_the_axis(rng):
    """softmax(dim=1), not log_softmax, handed over as log_probs: the axis, and that they are
    probabilities."""
    p, _ = _healthy(rng, full_length=True)
    logits = rng.normal(size=(60, 8, 12))
    report = diagnose(np.exp(logits) / np.exp(logits).sum(1, keepdims=True), **_args(p))
    assert report.codes[0] == "softmax-axis" and report.findings[0].evidence["axis"] == "batch"
    assert "probabilities, too" in report.findings[0].message


def test_softmax_over_time_of_a_batch_major_array_names_its_dim(rng):
    """softmax(dim=1) of an (N, T, C) array passed with layout='NTC' as probs: time, dim 1."""
    p, _ = _healthy(rng, full_length=True)
    logits = rng.normal(size=(8, 60, 12))
    probs = np.exp(logits) / np.exp(logits).sum(1, keepdims=True)
    report = diagnose(probs=probs, layout="NTC", **_args(p))
    assert report.codes[0] == "softmax-axis"
    assert report.findings[0].evidence["dim"] == 1 and report.findings[0].evidence["axis"] == "time"


def test_swapped_lengths_are_named_and_explain_the_symptoms(rng):
    """ctc_loss(lp, targets, target_lengths, input_lengths): lengths-swapped, explaining the
    length-mismatch and infeasible targets it causes; the rest is clean."""
    p, lp = _healthy(rng)
    report = diagnose(lp, **_args(p, input_lengths=p.target_lengths,
                                  target_lengths=p.input_lengths))
    assert report.codes[0] == "lengths-swapped" and _problems(report) == {"lengths-swapped"}
    assert "length-mismatch" in report.findings[0].explains


def test_swapped_lengths_with_concatenated_targets_are_named(rng):
    """Concatenated targets hold sum(target_lengths) labels: with the lengths swapped, that is
    sum(input_lengths); lengths-swapped, and the rest diagnosed exchanged (clean)."""
    p, lp = _healthy(rng)
    flat = p.targets[_mask(p)]
    report = diagnose(lp, **_args(p, targets=flat, input_lengths=p.target_lengths,
                                  target_lengths=p.input_lengths))
    assert report.codes[0] == "lengths-swapped" and _problems(report) == {"lengths-swapped"}


def test_transposed_targets_are_named(rng):
    """(L, N) targets: targets-transposed, and the rest diagnosed with targets.T (clean)."""
    p, lp = _healthy(rng)
    report = diagnose(lp, **_args(p, targets=p.targets.T))
    assert report.codes[0] == "targets-transposed" and _problems(report) == {"targets-transposed"}


def test_square_transposed_targets_are_named_when_only_the_transpose_fits(rng):
    """N = L: the shape cannot tell; labels equal to the blank in the given orientation, and
    none in the transpose, can."""
    p, lp = _healthy(rng, N=6, L=6, C=12)
    targets = rng.integers(1, 12, size=(6, 6))
    targets[:, 4:] = 0  # padding with the blank past lengths 4
    p = CTCProblem(np.zeros((60, 6, 12)), targets, np.full(6, 60), np.full(6, 4))
    lp = trained_log_probs(rng, p)
    report = diagnose(lp, **_args(p, targets=targets.T))
    assert report.codes[0] == "targets-transposed" and _problems(report) == {"targets-transposed"}


@pytest.mark.parametrize("pad", [0, -1])
def test_target_lengths_that_count_the_padding_are_named(rng, pad):
    """target_lengths = L for every sample while rows are padded with the blank (0) or -1:
    target-lengths-padded, with the real lengths as evidence."""
    p, lp = _healthy(rng)
    targets = np.where(_mask(p), p.targets, pad)
    report = diagnose(lp, **_args(p, targets=targets,
                                  target_lengths=np.full(8, p.targets.shape[1])))
    assert report.codes[0] == "target-lengths-padded"
    assert _problems(report) == {"target-lengths-padded"}
    over = report.findings[0].evidence["samples"]
    assert report.findings[0].evidence["without_padding"] == p.target_lengths[over].tolist()


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_half_precision_log_probs_are_named(rng, dtype):
    """AMP's float16/bfloat16 log-probs handed to the loss: half-precision, the only problem;
    torch's CPU kernel refuses them (checked here on the installed torch)."""
    import torch
    p, lp = _healthy(rng)
    x = torch.tensor(np.nan_to_num(lp, nan=0.0)).to(getattr(torch, dtype))
    report = diagnose(x, **_args(p))
    assert _problems(report) == {"half-precision"}
    with pytest.raises(NotImplementedError, match="ctc_loss_cpu"):
        torch.nn.functional.ctc_loss(x, torch.tensor(p.targets), torch.tensor(p.input_lengths),
                                     torch.tensor(p.target_lengths))


@pytest.mark.parametrize("kind", ["log_probs", "log_probs clamped", "probs", "logits"])
def test_loss_on_argmax_outputs_is_named(rng, kind):
    """one_hot(argmax) of a trained model's frames, as log() (0 and -inf), as a clamped log,
    as probs or as logits: argmax-outputs, ranked first."""
    p, lp = _healthy(rng)
    onehot = np.eye(12)[np.nan_to_num(lp, nan=0.0).argmax(-1)]  # (T, N, C)
    with np.errstate(divide="ignore"):
        values = {"log_probs": np.log(onehot), "log_probs clamped": np.log(onehot + 1e-10),
                  "probs": onehot, "logits": onehot}[kind]
    kw = {"probs" if kind == "probs" else "logits" if kind == "logits" else "log_probs": values}
    report = diagnose(**kw, **_args(p))
    assert report.codes[0] == "argmax-outputs", report


@pytest.mark.parametrize("pad", ["random", "blank-heavy"])
def test_padding_counted_as_frames_is_named(rng, pad):
    """Every sample given all T frames though the shorter ones were padded, their padding
    frames one output (a model's, or a blank-heavy frame with the other classes alike):
    padded-frames-counted, with the real lengths."""
    p, lp = _healthy(rng, T=60)
    pad_frame = log_softmax(rng.normal(size=12) if pad == "random" else np.r_[5.0, np.zeros(11)])
    lp = np.where(p.frame_mask[..., None], lp, pad_frame)
    report = diagnose(lp, **_args(p, input_lengths=np.full(8, 60)))
    assert report.codes[0] == "padded-frames-counted", report
    ev = report.findings[0].evidence
    padded = [n for n in range(8) if p.input_lengths[n] <= 60 - 3]
    assert [d["sample"] for d in ev["samples"]] == padded and ev["same_frame_across_samples"]
    assert [d["real_length_at_most"] for d in ev["samples"]] == \
        p.input_lengths[padded].tolist()


@pytest.mark.parametrize("liars", ["all", "one"])
def test_padding_output_that_varies_in_time_is_named_by_its_twin_in_other_samples(rng, liars):
    """Padding frames that change along time but are the same in every sample at the same step
    (the model's output on padding): all samples given T frames, or only one while the others'
    frames past their lengths hold that output. The liars are named; their real lengths are
    bounded by the steps where another sample shows the same padding output."""
    p, lp = _healthy(rng, T=60)
    pad = log_softmax(rng.normal(size=(60, 1, 12)))  # (T, 1, C): one output per step
    lp = np.where(p.frame_mask[..., None], lp, pad)
    order = np.argsort(p.input_lengths)
    lengths = np.full(8, 60) if liars == "all" else p.input_lengths.copy()
    if liars == "one":
        lengths[order[0]] = 60  # the shortest sample claims every frame
    report = diagnose(lp, **_args(p, input_lengths=lengths))
    assert report.codes[0] == "padded-frames-counted", report
    named = {d["sample"]: d["real_length_at_most"] for d in report.findings[0].evidence["samples"]}
    liar_set = [n for n in range(8) if lengths[n] > p.input_lengths[n] + 2]
    assert sorted(named) == liar_set
    assert all(p.input_lengths[n] <= named[n] < 60 for n in liar_set)


# -- legal conventions stay clean ------------------------------------------------------------------
def _conventions(rng, p, lp):
    """The same healthy batch in legal but less common conventions: (name, diagnose kwargs)."""
    T, N, C, L = p.shape
    m = _mask(p)
    yield "padded with -1", dict(log_probs=lp, **_args(p, targets=np.where(m, p.targets, -1)))
    yield "concatenated", dict(log_probs=lp, **_args(p, targets=p.targets[m]))
    yield "raw logits", dict(logits=np.nan_to_num(lp, nan=0.0) * 1.7 + 3.0, **_args(p))
    yield "probs", dict(probs=np.exp(lp), **_args(p))
    yield "untrained", dict(logits=rng.normal(size=(T, N, C)) * 0.01, **_args(p))
    yield "batch-major", dict(log_probs=lp.transpose(1, 0, 2), layout="NTC", **_args(p))
    yield "noiseless perfect", dict(log_probs=np.log(np.where(
        np.eye(C, dtype=bool)[spike_paths(p)], 0.99, 0.01 / (C - 1))), **_args(p))
    held = spike_paths(p)  # each label held for 3 frames from the start, then blank, if it fits
    for n in range(N):
        y = p.targets[n, : p.target_lengths[n]]
        if 3 * len(y) <= p.input_lengths[n] and (y[1:] != y[:-1]).all():
            held[:, n] = p.blank
            held[: 3 * len(y), n] = np.repeat(y, 3)
    yield "noiseless held labels", dict(log_probs=np.log(np.where(
        np.eye(C, dtype=bool)[held], 0.9, 0.1 / (C - 1))), **_args(p))
    if N >= 2:  # the same utterance twice in one batch: every frame shared, none padding
        twin = [0, 0, *range(2, N)]
        yield "duplicated sample", dict(log_probs=lp[:, twin], targets=p.targets[twin],
                                        input_lengths=p.input_lengths[twin],
                                        target_lengths=p.target_lengths[twin], blank=p.blank)
    yield "padding NaN", dict(log_probs=np.where(p.frame_mask[..., None], lp, np.nan),
                              **_args(p))


def test_torch_unbatched_form_is_one_sample(rng):
    """torch's unbatched form, (T, C) log-probs with (S,) targets and scalar lengths, is
    diagnosed as N = 1 and comes back as the same report as the batched (T, 1, C) form."""
    p, lp = _healthy(rng, N=1, full_length=True)
    n = int(p.target_lengths[0])
    batched = diagnose(lp, **_args(p))
    single = diagnose(lp[:, 0], targets=p.targets[0, :n], input_lengths=np.int64(60),
                      target_lengths=np.int64(n))
    assert single.summary["N"] == 1 and single.to_dict()["findings"] == \
        batched.to_dict()["findings"] == []


@pytest.mark.parametrize("seed", range(6))
def test_legal_conventions_are_clean_of_the_causes(seed):
    """Padding -1, concatenated targets, raw logits, probs, untrained outputs, batch-major with
    layout='NTC', noiseless perfect predictions and held labels, a duplicated sample; blank 0
    or last; T from 8 to 2000: no cause finding, and no warning or error at all."""
    rng = np.random.default_rng(seed)
    for T, C in ((8, 5), (80, 30), (2000, 12)):
        for blank in (0, C - 1):
            N, L = int(rng.integers(1, 7)), int(rng.integers(1, min(T // 3, 10) + 1))
            p = random_problem(rng, T=T, N=N, C=C, L=L, blank=blank, garbage=False)
            lp = trained_log_probs(rng, p)
            for name, kw in _conventions(rng, p, lp):
                report = diagnose(**kw)
                assert _problems(report) == set(), (name, T, C, blank, report)


@pytest.mark.parametrize("stride", [2, 4, 8])
def test_input_lengths_before_the_downsampling_are_named_with_the_factor(rng, stride):
    """input_lengths given as input widths, stride x the output frames: one cause naming the
    factor, whose frames are ceil(width / stride); with those the batch is clean."""
    p, _ = _healthy(rng, T=40)
    lengths = p.input_lengths.copy()
    lengths[0] = 40  # the longest input fills the batch
    p = CTCProblem(np.zeros((40, 8, 12)), p.targets, lengths, p.target_lengths)
    lp = trained_log_probs(rng, p)
    widths = lengths * stride - rng.integers(0, stride, size=len(lengths))  # before the stride
    frames = -(-widths // stride)
    assert (frames == lengths).all()
    report = diagnose(lp, **_args(p, input_lengths=widths))
    assert _problems(report) == {"input-lengths-units"}, report
    assert report.findings[0].evidence["factor"] == stride
    assert report.findings[0].evidence["in_frames"] == frames.tolist()[:10]
    assert _problems(diagnose(lp, **_args(p, input_lengths=frames))) == set()


