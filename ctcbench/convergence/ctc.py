"""The training loss: CTC from the registry, as a differentiable torch function.

``--ctc-backend torch`` calls ``torch.nn.functional.ctc_loss`` directly (fast path). Any
other registry backend (e.g. ``numpy``, the float64 reference) goes through
:func:`ctcbench.torch.ctc_loss`, the one bridge from registry backends to autograd, so its
reductions and gradient conventions are the registry's.
"""
from __future__ import annotations

import torch.nn.functional as F

from ctcbench.registry import get_backend

TRAIN_REDUCTIONS = ("mean", "sum")


def ctc_loss_fn(backend: str = "torch", *, reduction: str = "mean"):
    """``loss(logits (T, N, C), targets (N, L), input_lengths (N,), target_lengths (N,))``
    returning a scalar; blank is 0 and infeasible targets contribute 0 (zero_infinity)."""
    if reduction not in TRAIN_REDUCTIONS:
        raise ValueError(f"reduction: expected one of {', '.join(TRAIN_REDUCTIONS)}, got {reduction!r}")
    if backend == "torch":
        def torch_ctc(logits, targets, input_lengths, target_lengths):
            return F.ctc_loss(logits.log_softmax(-1), targets, input_lengths, target_lengths,
                              blank=0, reduction=reduction, zero_infinity=True)
        return torch_ctc
    from ctcbench.torch import ctc_loss
    loaded = get_backend(backend)  # KeyError for unknown names, BackendUnavailable if missing

    def registry_ctc(logits, targets, input_lengths, target_lengths):
        # logits go in as they are: the backend applies log_softmax itself
        return ctc_loss(logits, targets, input_lengths, target_lengths, blank=0,
                        reduction=reduction, zero_infinity=True, backend=loaded)
    return registry_ctc
