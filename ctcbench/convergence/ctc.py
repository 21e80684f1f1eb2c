"""The training loss: CTC from the registry, as a differentiable torch function.

``--ctc-backend torch`` calls ``torch.nn.functional.ctc_loss`` directly (fast path). Any
other registry backend (e.g. ``numpy``, the float64 reference) goes through
:func:`ctcbench.torch.ctc_loss`, the one bridge from registry backends to autograd, so its
reductions and gradient conventions are the registry's.
"""
from __future__ import annotations

import torch.nn.functional as F

from ctcbench.runtime.registry import get_backend

# "mean" and "sum" are torch's (mean divides each line's loss by its target length first);
# "per-line" is the mean over the batch of each line's whole loss, Keras' ctc_batch_cost
# convention, in which a 5-character captcha model on the blank plateau reads about 16
TRAIN_REDUCTIONS = ("mean", "sum", "per-line")


def ctc_loss_fn(backend: str = "torch", *, reduction: str = "mean"):
    """``loss(logits (T, N, C), targets (N, L), input_lengths (N,), target_lengths (N,))``
    returning a scalar; blank is 0 and infeasible targets contribute 0 (zero_infinity)."""
    if reduction not in TRAIN_REDUCTIONS:
        raise ValueError(f"reduction: expected one of {', '.join(TRAIN_REDUCTIONS)}, got {reduction!r}")
    inner = "none" if reduction == "per-line" else reduction  # (N,) losses, averaged below
    finish = (lambda losses: losses.mean()) if reduction == "per-line" else (lambda loss: loss)
    if backend == "torch":
        def torch_ctc(logits, targets, input_lengths, target_lengths):
            return finish(F.ctc_loss(logits.log_softmax(-1), targets, input_lengths,
                                     target_lengths, blank=0, reduction=inner, zero_infinity=True))
        return torch_ctc
    from ctcbench.torch import ctc_loss
    loaded = get_backend(backend)  # KeyError for unknown names, BackendUnavailable if missing

    def registry_ctc(logits, targets, input_lengths, target_lengths):
        # logits go in as they are: the backend applies log_softmax itself
        return finish(ctc_loss(logits, targets, input_lengths, target_lengths, blank=0,
                               reduction=inner, zero_infinity=True, backend=loaded))
    return registry_ctc
