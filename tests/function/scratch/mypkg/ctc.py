"""An implementer's CTC binding, as a project under test would have it: torch's kernel with
zero_infinity=True (so a target with no path scores 0: its known issue)."""
import torch


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="none"):
    return torch.nn.functional.ctc_loss(log_probs, targets, input_lengths, target_lengths,
                                        blank=blank, reduction="none", zero_infinity=True)
