"""Per-sample CTC losses for evidence, by the NumPy reference, under any blank index."""
from __future__ import annotations

import numpy as np

from ctcbench.core.reference import forward_backward
from ctcbench.doctor.inputs import Inputs

MAX_LOSS_SAMPLES = 64  # losses for evidence are computed on at most this many samples


def usable_samples(inp: Inputs, *, blanks=()) -> np.ndarray:
    """``(N,)`` samples whose labels are valid classes (none equal to the blank(s) in
    ``blanks`` or to ``inp.blank``) and whose target fits its frames: the loss is finite."""
    T, N, C, L = inp.shape
    m = inp.label_mask
    ok = ((inp.targets >= 0) & (inp.targets < C)) | ~m
    for b in (inp.blank, *blanks):
        ok &= (inp.targets != b) | ~m
    return ok.all(axis=1) & (inp.target_lengths <= L) & (inp.needed_frames() <= inp.lengths)


def reference_losses(lp: np.ndarray, inp: Inputs, blank: int, samples: np.ndarray) -> np.ndarray:
    """Per-sample CTC loss of the chosen ``samples`` (the first ``MAX_LOSS_SAMPLES`` of them,
    so evidence stays cheap on big batches) under ``blank``, by the NumPy reference."""
    idx = np.flatnonzero(samples)[:MAX_LOSS_SAMPLES]
    targets = np.where(inp.label_mask, inp.targets, 0)[idx]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # -inf log-zeros
        fb = forward_backward(np.ascontiguousarray(lp[:, idx]), targets, inp.lengths[idx],
                              inp.target_lengths[idx], blank=blank)
    return fb.loss
