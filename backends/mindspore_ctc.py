"""Backend ``mindspore``: ``mindspore.ops.ctc_loss`` (MindSpore, CPU, PyNative mode).

MindSpore's CTC loss follows torch's signature: time-major log-probabilities ``(T, N, C)``,
padded targets ``(N, S)``, ``input_lengths`` and ``target_lengths`` ``(N,)``, ``blank``,
``reduction`` and ``zero_infinity``; it returns ``(loss, log_alpha)``. The adapter asks for
``reduction="none"`` and differentiates the weighted sum w.r.t. the logits with
``mindspore.value_and_grad``. float32 and float64.

Trap: ``ops.log_softmax`` is float32-grade even on float64 (3.6e-6 off), so the adapter
computes the log-softmax itself; ``ops.ctc_loss`` is exact on exact log-probabilities.
Refused: an infeasible target and a logit of -inf (NaN gradients), an input of length 0 (the
kernel fails to launch, or gives a non-zero loss for an empty target). Runs in its own worker:
MindSpore's runtime is heavy to load; its thread count is MindSpore's own.
"""
from __future__ import annotations

import numpy as np

from ctcbench.core.problem import CTCProblem
from ctcbench.runtime.protocol import BackendResult, UnsupportedProblem

from ._thirdparty import check_dtype, padded_labels, refuse_infeasible, refuse_neg_inf, require


class MindSporeBackend:
    """mindspore.ops.ctc_loss with padded targets, loss per sample; float32 and float64."""

    name = "mindspore"
    clears_padded_frames = True  # its framework gets logit 0 there (clean_logits)
    isolated = True
    dtypes = ("float32", "float64")
    packages = ("mindspore",)

    def __init__(self):
        require(("mindspore",), extra="mindspore")
        self.ms = None

    def prepare(self) -> None:
        import mindspore as ms
        ms.set_context(mode=ms.PYNATIVE_MODE, device_target="CPU")
        self.ms = ms

    def run(self, problem: CTCProblem, *, grad_weights=None) -> BackendResult:
        """``grad_weights (N,)``: upstream gradient per loss (default 1)."""
        check_dtype(problem, self.name, self.dtypes)
        refuse_neg_inf(problem, self.name, "mindspore returns NaN gradients")
        refuse_infeasible(problem, self.name, "NaN gradients with the loss")
        empty = np.flatnonzero(problem.input_lengths == 0)
        if len(empty):
            raise UnsupportedProblem(
                f"{self.name} cannot take an input length of 0 (samples {empty[:5].tolist()}): "
                "its CTCLossV2 kernel fails to launch, or with an empty target returns a "
                "non-zero loss, instead of 0 or inf")
        if self.ms is None:
            self.prepare()
        ms = self.ms
        from mindspore import Tensor, ops
        dtype = np.dtype(problem.dtype)
        N = problem.shape[1]
        labels, _ = padded_labels(problem)  # (N, L')
        targets = Tensor(labels.astype(np.int64))
        input_lengths = Tensor(problem.input_lengths.astype(np.int64))
        target_lengths = Tensor(problem.target_lengths.astype(np.int64))
        weights = Tensor(np.ones(N, dtype) if grad_weights is None
                         else np.asarray(grad_weights, dtype))
        blank = int(problem.blank)

        def total(logits):
            top = ops.stop_gradient(logits.max(axis=-1, keepdims=True))  # (T, N, 1)
            shifted = logits - top
            log_probs = shifted - ops.log(ops.exp(shifted).sum(axis=-1, keepdims=True))
            loss, _ = ops.ctc_loss(log_probs, targets, input_lengths,
                                   target_lengths, blank=blank, reduction="none")  # (N,)
            return (loss * weights).sum(), loss

        logits = Tensor(problem.clean_logits(dtype))  # (T, N, C)
        (_, loss), grad = ms.value_and_grad(total, has_aux=True)(logits)
        return BackendResult(loss.asnumpy().astype(dtype), grad.asnumpy().astype(dtype),
                             compute_dtype=str(dtype))

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        """``mindspore.ops.ctc_loss`` (``reduction="none"``) on the adapter's own log-softmax
        of the logits as given, the targets and lengths as given, and the gradient of the
        loss's sum w.r.t. the logits (``mindspore.value_and_grad``)."""
        if self.ms is None:
            self.prepare()
        from mindspore import Tensor, ops
        targets, input_lengths, target_lengths = (
            Tensor(np.asarray(a)) for a in (targets, input_lengths, target_lengths))

        def total(x):
            top = ops.stop_gradient(x.max(axis=-1, keepdims=True))  # (T, N, 1)
            shifted = x - top
            log_probs = shifted - ops.log(ops.exp(shifted).sum(axis=-1, keepdims=True))
            loss, _ = ops.ctc_loss(log_probs, targets, input_lengths, target_lengths,
                                   blank=blank, reduction="none")  # (N,)
            return loss.sum(), loss

        (_, loss), grad = self.ms.value_and_grad(total, has_aux=True)(Tensor(np.asarray(logits)))
        return loss.asnumpy(), grad.asnumpy()
