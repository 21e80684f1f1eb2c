"""CTC functions that run but answer in another form than their convention's, each the way
users write one; the probe must say what is wrong with each."""
import numpy as np
import torch
import torch.nn.functional as F


def _torch(log_probs, targets, input_lengths, target_lengths, blank, reduction="none"):
    return F.ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=blank,
                      reduction=reduction)


def returns_loss_and_aux(log_probs, targets, input_lengths, target_lengths, blank=0,
                         reduction="none"):
    loss = _torch(log_probs, targets, input_lengths, target_lengths, blank)
    return loss, {"frames": int(input_lengths.sum())}


def mean_by_default(log_probs, targets, input_lengths, target_lengths, blank=0):
    return _torch(log_probs, targets, input_lengths, target_lengths, blank, "mean")


def column_of_losses(log_probs, targets, input_lengths, target_lengths, blank=0,
                     reduction="none"):
    return _torch(log_probs, targets, input_lengths, target_lengths, blank)[:, None]  # (N, 1)


def only_mean(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="mean"):
    if reduction != "mean":
        raise NotImplementedError(f"reduction={reduction!r}")
    return _torch(log_probs, targets, input_lengths, target_lengths, blank, "mean")


def takes_probabilities(log_probs, targets, input_lengths, target_lengths, blank=0,
                        reduction="none"):
    """Takes the log of what it is handed, as if it were probabilities."""
    return _torch(log_probs.log(), targets, input_lengths, target_lengths, blank)


def asserts_probabilities(log_probs, targets, input_lengths, target_lengths, blank=0,
                          reduction="none"):
    """Checks its input is probabilities first."""
    if not bool(((log_probs >= 0) & (log_probs <= 1)).all()):
        raise ValueError("expected probabilities in [0, 1]")
    return _torch(log_probs.log(), targets, input_lengths, target_lengths, blank)


def int8_only(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="none"):
    """A quantised kernel: refuses every float dtype, each in its own words."""
    if log_probs.dtype != torch.int8:
        raise TypeError(f"{log_probs.dtype} is not supported")
    return _torch(log_probs, targets, input_lengths, target_lengths, blank)


def always_raises(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="none"):
    raise RuntimeError("kernel not built")


def numpy_loss_only(logits, targets, input_lengths, target_lengths, blank=0):
    """The numpy convention wants (loss, grad); this returns the loss alone."""
    return np.zeros(logits.shape[1])


def numpy_logits_as_log_probs(logits, targets, input_lengths, target_lengths, blank=0):
    """Takes the logits for log-probabilities (no log_softmax): the two-frame probe's loss."""
    lp = np.asarray(logits, np.float64)  # (T, N, C), not normalised: the mistake
    loss = np.empty(lp.shape[1])
    for n in range(lp.shape[1]):
        T, label = int(input_lengths[n]), int(targets[n, 0])
        paths = [(label, label), (blank, label), (label, blank)] if T == 2 else []
        loss[n] = -np.logaddexp.reduce([lp[0, n, a] + lp[1, n, b] for a, b in paths])
    return loss, np.zeros(lp.shape)
