"""The binding with a planted bug: it drops the blank argument, so blank 0 is always used."""
import torch


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="none"):
    return torch.nn.functional.ctc_loss(log_probs, targets, input_lengths, target_lengths,
                                        blank=0, reduction="none", zero_infinity=True)
