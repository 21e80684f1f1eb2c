"""The training loss: CTC from the registry, as a differentiable torch function.

``--ctc-backend torch`` calls ``torch.nn.functional.ctc_loss`` directly (fast path). Any
other registry backend (e.g. ``numpy``, the float64 reference) goes through
:func:`ctcbench.torch.ctc_loss`, the one bridge from registry backends to autograd, so its
reductions and gradient conventions are the registry's. The reductions themselves
("mean", "sum", "per-line") are those of :mod:`ctcbench.core.reduction`.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from ctcbench.core.reduction import backend_reduction
from ctcbench.runtime.registry import get_backend


def ctc_loss_fn(backend: str = "torch", *, reduction: str = "mean"):
    """``loss(logits (T, N, C), targets (N, L), input_lengths (N,), target_lengths (N,))``
    returning a scalar; blank is 0 and infeasible targets contribute 0 (zero_infinity)."""
    inner, finish = backend_reduction(reduction)  # ValueError naming reduction
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


def model_loss(model, loss_fn, x, targets, lengths) -> tuple[torch.Tensor, torch.Tensor]:
    """``(scalar loss, outputs)`` of ``model`` on images ``x (N, 1, H, W)`` with labels
    ``targets (N, L)`` of ``lengths (N,)``: ``loss_fn`` for a CTC head, per-position cross
    entropy for the baseline (class 0 marks positions past the end)."""
    out = model(x)
    if model.ctc:  # out: (T, N, C)
        T, N, _ = out.shape
        input_lengths = torch.full((N,), T, dtype=torch.long)
        return loss_fn(out, targets, input_lengths, lengths), out
    # out: (N, max_len, C)
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), targets.reshape(-1)), out
