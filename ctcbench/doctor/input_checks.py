"""Checks on the lengths, targets and reduction the user passes: no model values needed."""
from __future__ import annotations

import numpy as np

from ctcbench.doctor.findings import MAX_LISTED, Code, Finding, rounded
from ctcbench.doctor.inputs import Inputs

REDUCTION_RATIO = 10.0  # reduction note when max/min target length (clamped to 1) reaches this


def check_lengths(inp: Inputs) -> list[Finding]:
    T, N, C, L = inp.shape
    findings = []
    too_long = np.flatnonzero(inp.input_lengths > T)
    if len(too_long):
        factor = float(inp.input_lengths.max()) / T
        hint = ""
        if factor >= 1.5:
            hint = (f" They look like widths before the model's downsampling (about {factor:.3g}x "
                    f"longer than T).")
        findings.append(Finding(
            Code.LENGTH_MISMATCH, "error",
            f"input_lengths exceed the {T} frames of the output for {len(too_long)} of {N} "
            f"samples (max {int(inp.input_lengths.max())}).{hint}",
            {"T": T, "max_input_length": int(inp.input_lengths.max()),
             "ratio_to_T": rounded(factor, 3), "samples": too_long.tolist()},
            "compute input_lengths on the model's time axis (after pooling/stride: e.g. "
            "width // downsampling, or the conv arithmetic), and never above T."))
    too_wide = np.flatnonzero(inp.target_lengths > L)
    if len(too_wide):
        findings.append(Finding(
            Code.LENGTH_MISMATCH, "error",
            f"target_lengths exceed the padded target width L = {L} for {len(too_wide)} samples.",
            {"L": L, "max_target_length": int(inp.target_lengths.max()),
             "samples": too_wide.tolist()},
            "pass the true label counts as target_lengths (padding excluded)."))
    return findings


def check_targets(inp: Inputs, blank_finding: Finding | None) -> list[Finding]:
    T, N, C, L = inp.shape
    m = inp.label_mask
    findings = []
    out = m & ((inp.targets < 0) | (inp.targets >= C))
    if out.any():
        bad = inp.targets[out]
        findings.append(Finding(
            Code.TARGET_OUT_OF_RANGE, "error",
            f"{int(out.sum())} target labels lie outside the {C} classes of the output "
            f"(values {int(bad.min())}..{int(bad.max())}).",
            {"C": C, "bad_values": sorted(set(bad.tolist()))[:MAX_LISTED],
             "samples": sorted(set(np.argwhere(out)[:, 0].tolist()))},
            "labels must be class indices in [0, C) other than the blank: check the vocabulary "
            "size of the output layer (it needs one extra class for the blank)."))
    has_blank = m & (inp.targets == inp.blank)
    if has_blank.any():
        where = [tuple(map(int, p)) for p in np.argwhere(has_blank)]
        labels = inp.targets[m]
        keras_like = inp.blank == 0 and not (labels == C - 1).any()
        fix = ("labels must never equal the blank. ")
        fix += ("The labels look 0-based with no class C-1 used: the Keras/TF v1 convention puts "
                f"the blank at C-1 = {C - 1}; pass blank={C - 1}, or shift labels by +1 and keep "
                "blank=0." if keras_like else
                "Reserve one class for the blank and map the labels to the others.")
        findings.append(Finding(
            Code.TARGET_CONTAINS_BLANK, "error",
            f"{len(where)} target labels equal the blank index {inp.blank} "
            f"(in {len(set(w[0] for w in where))} samples); CTC cannot emit a blank as a label.",
            {"blank": inp.blank, "count": len(where), "positions": [list(w) for w in where]},
            fix))
        if blank_finding is not None and blank_finding.severity == "error":
            blank_finding.explains.append(Code.TARGET_CONTAINS_BLANK)
    return findings


def check_infeasible(inp: Inputs) -> list[Finding]:
    need, have = inp.needed_frames(), inp.lengths
    bad = np.flatnonzero(need > have)
    if not len(bad):
        return []
    detail = [{"sample": int(n), "needs": int(need[n]), "has": int(have[n]),
               "short_by": int(need[n] - have[n])} for n in bad[:MAX_LISTED]]
    return [Finding(
        Code.INFEASIBLE_TARGET, "error",
        f"{len(bad)} of {len(have)} targets need more frames (labels + adjacent repeats) than "
        f"their input length (short by up to {int((need - have)[bad].max())}); their loss is "
        "inf, and nan once averaged.",
        {"count": int(len(bad)), "samples": detail},
        "downsample time less (or feed wider inputs), drop these samples, or pass "
        "zero_infinity=True so they contribute 0 loss and 0 gradient instead of inf/nan.")]


def check_reduction(inp: Inputs) -> Finding | None:
    if inp.reduction != "mean" or len(inp.target_lengths) < 2:
        return None
    clamped = np.maximum(inp.target_lengths, 1)
    ratio = clamped.max() / clamped.min()
    empty = ", empty targets count as 1" if inp.target_lengths.min() == 0 else ""
    if ratio < REDUCTION_RATIO:
        return None
    return Finding(
        Code.REDUCTION, "info",
        f"reduction='mean' divides each loss by its own target length ({int(clamped.min())}.."
        f"{int(clamped.max())}{empty}), so per label a short sample weighs "
        f"{ratio:.3g}x more than a long one and the printed loss is not comparable to a "
        "per-sample mean.",
        {"min_target_length": int(inp.target_lengths.min()),
         "max_target_length": int(inp.target_lengths.max()), "weight_ratio": rounded(ratio, 3)},
        "that is torch's documented convention; use reduction='sum' / N for a per-sample mean, "
        "and compare losses across runs only under one reduction.")
