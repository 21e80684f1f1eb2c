"""CTC losses an implementer writes over torch's kernel, in torch's calling convention."""
import json
import os

import torch
import torch.nn.functional as F


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="none"):
    """torch's kernel as it is."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=blank,
                      reduction="none")


def ctc_loss_zero_infinity(log_probs, targets, input_lengths, target_lengths, blank=0,
                           reduction="none"):
    """torch's kernel with zero_infinity=True: a target with no path scores 0."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=blank,
                      reduction="none", zero_infinity=True)


def ctc_loss_drops_blank(log_probs, targets, input_lengths, target_lengths, blank=0,
                         reduction="none"):
    """A planted bug of the wrapper's own: the blank argument is dropped (blank 0 always)."""
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0,
                      reduction="none")


def ctc_loss_recording(log_probs, targets, input_lengths, target_lengths, blank=0,
                       reduction="none"):
    """torch's kernel, writing what each call was handed to the file $CTCBENCH_RECORD."""
    T = log_probs.shape[0]
    padded = torch.arange(T)[:, None] >= input_lengths[None, :]  # (T, N)
    seen = {"targets_dtype": str(targets.dtype), "targets_ndim": targets.dim(),
            "lengths_dtype": str(input_lengths.dtype),
            "nan_in_padding": bool(log_probs[padded].isnan().any()),
            "neg_inf": bool(log_probs.isneginf().any())}
    with open(os.environ["CTCBENCH_RECORD"], "a") as f:
        f.write(json.dumps(seen) + "\n")
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=blank,
                      reduction="none")
