"""The training loss: CTC from the registry, as a differentiable torch function.

``--ctc-backend torch`` calls ``torch.nn.functional.ctc_loss`` directly (fast path). Any
other registry backend that returns ``grad_logits`` (e.g. ``numpy``, the float64
reference) is wrapped in a ``torch.autograd.Function``: forward runs the backend on the
detached logits, backward hands back its gradient w.r.t. the logits scaled by the
reduction weights from :mod:`ctcbench.core.reduction`, so the conventions are the registry's.
"""
from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F

from ctcbench.core.problem import CTCProblem
from ctcbench.core.reduction import reduction_weights
from ctcbench.registry import get_backend

TRAIN_REDUCTIONS = ("mean", "sum")


class RegistryCTC(torch.autograd.Function):
    """Reduced CTC loss of ``logits (T, N, C)`` computed by a registry backend."""

    @staticmethod
    def forward(ctx, logits, targets, input_lengths, target_lengths, backend, reduction):
        problem = CTCProblem(logits.detach().cpu(), targets.cpu(), input_lengths.cpu(),
                             target_lengths.cpu(), blank=0)
        result = backend.run(problem)
        w = reduction_weights(problem.target_lengths, reduction)  # (N,)
        finite = np.isfinite(result.loss)  # infeasible targets count 0 (zero_infinity)
        loss = float((np.where(finite, result.loss, 0.0) * w).sum())
        grad = result.grad_logits * w[None, :, None]  # (T, N, C); zero for infeasible samples
        ctx.save_for_backward(torch.from_numpy(grad).to(logits.dtype))
        return logits.new_tensor(loss)

    @staticmethod
    def backward(ctx, grad_out):
        (grad,) = ctx.saved_tensors
        return grad_out * grad, None, None, None, None, None


def ctc_loss_fn(backend: str = "torch", *, reduction: str = "mean"):
    """``loss(logits (T, N, C), targets (N, L), input_lengths (N,), target_lengths (N,))``
    returning a scalar; blank is 0 and infeasible targets contribute 0."""
    if reduction not in TRAIN_REDUCTIONS:
        raise ValueError(f"reduction: expected one of {', '.join(TRAIN_REDUCTIONS)}, got {reduction!r}")
    if backend == "torch":
        def torch_ctc(logits, targets, input_lengths, target_lengths):
            return F.ctc_loss(logits.log_softmax(-1), targets, input_lengths, target_lengths,
                              blank=0, reduction=reduction, zero_infinity=True)
        return torch_ctc
    impl = get_backend(backend)  # KeyError for unknown names, BackendUnavailable if missing

    def registry_ctc(logits, targets, input_lengths, target_lengths):
        return RegistryCTC.apply(logits, targets, input_lengths, target_lengths, impl, reduction)
    return registry_ctc
