"""Checks on the model's frames: the blank index it uses, the blank plateau, frames that
do not change along time."""
from __future__ import annotations

import numpy as np

from ctcbench.core.ctcmath import edit_distance, greedy_decode
from ctcbench.doctor.findings import Code, Finding, rounded
from ctcbench.doctor.inputs import Inputs
from ctcbench.doctor.losses import MAX_LOSS_SAMPLES, reference_losses, usable_samples

# Thresholds, each chosen so that well-formed inputs of any shape stay clean.
SAME_FRAME_TOL = 1e-3  # frames whose log-probs spread less than this (rms) count as all alike
TIME_VARIANCE_SHARE = 0.1  # time-invariant when time explains less than this of frame variance
STEADY_SHARE = 0.75  # ... and this share of samples with 2+ labels change argmax at most twice
LOG_FLOOR = np.log(1e-12)  # log-probs are clipped here for variances (log(0) = -inf)
COLLAPSE_EMIT_SHARE = 0.2  # greedy output holds at most this share of the target labels
COLLAPSE_MARGIN = np.log(2)  # and blank is on average at least 2x as likely as the best label
DOMINANT_SHARE = 0.3  # blank-index: the other convention's blank is argmax on this share of frames
USER_BLANK_SHARE = 0.05  # ... while the loss's blank is argmax on at most this share
BLANK_CONFIDENCE = 0.3  # ... with at least this mean probability on the frames it wins
MIN_FRAMES = 16  # blank-index: valid frames needed before argmax shares mean anything


def check_blank_index(inp: Inputs, lp: np.ndarray) -> Finding | None:
    T, N, C, L = inp.shape
    valid = inp.frame_mask
    if C < 2 or not valid.any():
        return None
    if valid.sum() < MIN_FRAMES:
        return None
    best = lp.argmax(-1)  # (T, N)
    # A frame whose argmax is one of its sample's target labels is that label, not a blank.
    is_label = ((best[..., None] == inp.targets[None]) & inp.label_mask[None]).any(-1)  # (T, N)
    argmax = np.where(is_label, -1, best)[valid]  # (F,); -1: a target label of the sample
    share = np.bincount(argmax + 1, minlength=C + 1)[1:] / len(argmax)
    # The two conventions in use: blank 0 (torch, warp-ctc) and blank C-1 (Keras, TF v1).
    candidates = [b for b in (0, C - 1) if b != inp.blank]
    model_blank = max(candidates, key=lambda b: share[b])
    if share[model_blank] < DOMINANT_SHARE or share[inp.blank] > USER_BLANK_SHARE:
        return None
    # A trained model's blank frames are confident; an untrained one's argmax is a coin toss.
    confidence = float(np.exp(lp[..., model_blank][valid][argmax == model_blank]).mean())
    if confidence < BLANK_CONFIDENCE:
        return None
    evidence = {"loss_blank": inp.blank, "model_blank": model_blank,
                "argmax_share_model_blank": rounded(share[model_blank], 3),
                "argmax_share_loss_blank": rounded(share[inp.blank], 3),
                "mean_prob_where_argmax": rounded(confidence, 3)}
    both = usable_samples(inp, blanks=(model_blank,))
    evidence["samples_scored_under_both"] = int(min(both.sum(), MAX_LOSS_SAMPLES))
    if both.any():
        as_given = reference_losses(lp, inp, inp.blank, both)
        other = reference_losses(lp, inp, model_blank, both)
        evidence[f"mean_loss_blank_{inp.blank}"] = rounded(as_given.mean())
        evidence[f"mean_loss_blank_{model_blank}"] = rounded(other.mean())
        if not other.mean() < as_given.mean():
            return None
    conv = {0: " (torch/PyTorch default)", C - 1: " (Keras/TF v1 convention)"}
    shares = (f"class {model_blank} is the argmax on {share[model_blank]:.0%} of frames (not "
              f"counting frames where it is a target label), class {inp.blank} (the loss's "
              f"blank) on {share[inp.blank]:.1%}")
    fix = (f"use one convention end to end: pass blank={model_blank} to the loss (and the "
           "decoder), or retrain/relabel so the model's blank is the loss's blank.")
    if not both.any():  # no loss to compare: a hint, not a diagnosis
        return Finding(
            Code.BLANK_INDEX, "info",
            f"the model's frames may use blank = {model_blank}{conv.get(model_blank, '')}: "
            f"{shares}; unconfirmed, as no sample can be scored under both blanks (each "
            f"holds {inp.blank} or {model_blank} as a label, or does not fit its frames).",
            evidence, "if the model was trained with another blank, " + fix)
    return Finding(
        Code.BLANK_INDEX, "error",
        f"the model's frames look like blank = {model_blank}{conv.get(model_blank, '')}: "
        f"{shares}.", evidence, fix)


def check_blank_collapse(inp: Inputs, lp: np.ndarray) -> Finding | None:
    valid = inp.frame_mask
    judged = (inp.target_lengths > 0) & (inp.needed_frames() <= inp.lengths)
    if not judged.any():
        return None
    decoded = greedy_decode(lp, inp.lengths, blank=inp.blank)
    emitted = np.array([len(labels) for labels in decoded])[judged]  # (n,) labels emitted
    targets = np.minimum(inp.target_lengths, inp.shape[3])[judged]
    blank_prob = np.exp(lp[..., inp.blank])[valid].mean()
    argmax_blank = (lp.argmax(-1) == inp.blank)[valid].mean()
    healthy_blank = 1 - targets.sum() / inp.lengths[judged].sum()
    empty = float((emitted == 0).mean())
    floored = np.maximum(lp, LOG_FLOOR)  # log(0) = -inf would make -inf - -inf = nan
    others = np.delete(floored, inp.blank, axis=-1).max(-1) if lp.shape[-1] > 1 else floored[..., 0]
    margin = float((floored[..., inp.blank] - others)[valid].mean())  # log-odds blank vs best label
    if emitted.sum() > COLLAPSE_EMIT_SHARE * targets.sum() or margin < COLLAPSE_MARGIN:
        return None
    return Finding(
        Code.BLANK_COLLAPSE, "warning",
        f"greedy decoding emits {int(emitted.sum())} labels for {int(targets.sum())} target "
        f"labels ({empty:.0%} of samples decode to nothing): the model sits on the blank "
        "plateau, predicting blank on "
        f"{argmax_blank:.0%} of frames where a perfect model would on about {healthy_blank:.0%}.",
        {"emitted_labels": int(emitted.sum()), "target_labels": int(targets.sum()),
         "empty_output_share": rounded(empty, 3), "argmax_blank_share": rounded(argmax_blank, 3),
         "mean_blank_prob": rounded(blank_prob, 3), "mean_blank_log_odds": rounded(margin, 3),
         "perfect_blank_share": rounded(healthy_blank, 3)},
        "CTC learns blanks first; usually it needs more steps, a learning rate that is not too "
        "high or too low (try 1e-4..1e-3 with Adam, or RMSprop), less momentum if the loss "
        "oscillates, gradient clipping, and short samples first (curriculum).")


def check_time_invariant(inp: Inputs, lp: np.ndarray, collapse: Finding | None) -> Finding | None:
    """Frames that do not change along time.

    With several samples: time explains almost none of the variance of the frames in the
    middle half of each sample, and most samples with two or more labels change their argmax
    at most twice (each sample has its own constant frame, perhaps after a short settling, as
    an RNN fed one repeated vector gives). Otherwise, per sample: the frames' spread along
    time is under 1% of how far their mean frame is from uniform, with one argmax class, and
    over all valid frames the argmax changes at most twice and greedy decoding is not within
    half the target length (edit distance) of the target."""
    T, N, C, L = inp.shape
    lengths = inp.lengths
    eligible = lengths >= 4
    if C < 2 or not eligible.any():
        return None
    t = np.arange(T)[:, None]
    # The middle half of each sample's frames: an RNN fed a constant vector settles from the
    # start (and, if bidirectional, from the end); content varies there all the same.
    middle = (t >= lengths[None, :] // 4) & (t < lengths[None, :] - lengths[None, :] // 4)
    mask = inp.frame_mask & middle & eligible[None, :]  # (T, N)
    x = np.where(mask[..., None], np.maximum(lp, LOG_FLOOR), 0.0)  # (T, N, C); log(0) clipped
    frames = int(mask.sum())
    sample_mean = x.sum(0) / np.maximum(mask.sum(0), 1)[:, None]  # (N, C)
    within = float((((x - sample_mean[None]) ** 2).sum(-1) * mask).sum() / frames)
    overall = float((((x - x.sum((0, 1)) / frames) ** 2).sum(-1) * mask).sum() / frames)
    evidence = {"checked_samples": int(eligible.sum())}
    # A healthy model can also hold a steady background for long stretches; it still changes
    # its argmax at least 3 times to emit 2 labels (blank, a, blank, b, ...), where a settling
    # RNN changes it at most at both ends.
    best = lp.argmax(-1)  # (T, N)
    changes = ((best[1:] != best[:-1]) & inp.frame_mask[1:]).sum(axis=0)  # (N,)
    if eligible.sum() >= 2 and overall > SAME_FRAME_TOL ** 2:
        share = within / overall
        evidence.update(time_variance_share=rounded(share), frame_variance=rounded(overall))
        judged = eligible & (inp.target_lengths >= 2)
        if share >= TIME_VARIANCE_SHARE or not judged.any():
            return None
        steady = float((changes[judged] <= 2).mean())
        evidence["steady_argmax_share"] = rounded(steady, 3)
        if steady < STEADY_SHARE:
            return None
    else:  # one sample, or every frame alike: compare each sample's change along time with
        # how far its mean frame is from uniform (zero for uniform frames: nothing to judge).
        # The middle half of a confident model is all blank: the argmax over all valid frames
        # and the greedy output decide too (a sample that decodes to its target moves).
        decoded = greedy_decode(lp, inp.lengths, blank=inp.blank)
        for n in np.flatnonzero(eligible):
            own = x[mask[:, n], n]  # (t, C)
            mean = own.mean(0)
            change = ((own - mean) ** 2).sum(-1).mean()
            shape = ((mean - mean.mean()) ** 2).sum()
            if not change < TIME_VARIANCE_SHARE ** 2 * shape or len(set(own.argmax(-1))) > 1:
                return None
            target = inp.targets[n, inp.label_mask[n]].tolist()
            if changes[n] > 2 or edit_distance(decoded[n], target) < max(len(target), 1) / 2:
                return None
        evidence["frames_alike"] = True
        if collapse is not None:
            return None  # one constant blank frame for every input: the blank plateau says it all
    evidence["mean_loss_of_these_frames"] = rounded(_invariant_loss(inp, lp))
    finding = Finding(
        Code.TIME_INVARIANT, "error",
        "the frames (nearly) do not change along time: each sample shows the same distribution "
        "at every step, so the model cannot place labels, as when one feature vector is "
        "repeated for every time step.", evidence,
        "feed the recurrent/attention layers a sequence along the image width (e.g. conv "
        "features permuted to (W, N, C*H), or unfold windows), not one pooled vector copied T "
        "times.")
    if collapse is not None:
        finding.explains.append(Code.BLANK_COLLAPSE)
    return finding


def _invariant_loss(inp: Inputs, lp: np.ndarray) -> float:
    """Mean loss of the given frames (as a yardstick for the plateau); nan if none usable."""
    usable = usable_samples(inp)
    return float(reference_losses(lp, inp, inp.blank, usable).mean()) if usable.any() else float("nan")
