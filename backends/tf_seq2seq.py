"""Backend ``tf-seq2seq``: ``tf_seq2seq_losses.classic_ctc_loss`` (TensorFlow, pure TF ops).

tf-seq2seq-losses computes CTC with its own forward-backward in TensorFlow ops and a custom
gradient that can itself be differentiated (second order). It wants batch-major logits
``(N, T, C)`` (log_softmax applied inside), dense int32 labels ``(N, L)`` with
``label_length``, ``logit_length`` and ``blank_index``; it returns the per-sequence loss. It
asserts float32 inputs, so float64 is refused. An infeasible target gets ``inf`` and a zero
gradient, as the contract wants, and logits of -inf are handled right, so neither is
refused. Runs in its own worker, as ``tf``.
"""
from __future__ import annotations

import numpy as np

from .tf_ctc import TFDenseBackend
from ._thirdparty import require


class TFSeq2SeqBackend(TFDenseBackend):
    """tf_seq2seq_losses.classic_ctc_loss with dense labels; float32 only."""

    name = "tf-seq2seq"
    packages = ("tf_seq2seq_losses", "tensorflow")
    dtypes = ("float32",)  # base_loss.py asserts the log-probabilities are tf.float32
    _infeasible_behaviour = None  # loss inf, gradient 0: nothing to refuse
    _neg_inf_behaviour = None  # logits of -inf: right loss, finite gradient (measured)

    def __init__(self):
        require(("tensorflow", "tf_seq2seq_losses"), extra="tfseq2seq")
        self.tf = None

    def prepare(self) -> None:
        super().prepare()
        from tf_seq2seq_losses import classic_ctc_loss
        self._ctc = classic_ctc_loss

    def _loss_and_grad(self, logits, labels, label_length, logit_length, weights, blank):
        tf = self.tf
        with tf.GradientTape() as tape:
            tape.watch(logits)
            loss = self._ctc(labels, tf.transpose(logits, (1, 0, 2)), label_length,
                             logit_length, blank_index=blank)  # (N,)
        return loss, tape.gradient(loss, logits, output_gradients=weights)

    def hvp(self, problem, vector):
        """The Hessian-vector product ``H v`` of ``sum(loss)`` w.r.t. the logits, ``(T, N, C)``,
        by differentiating the library's own gradient (its second-order claim)."""
        logits, labels, label_length, logit_length, weights, blank = self._inputs(problem, None)
        tf = self.tf
        v = tf.constant(np.asarray(vector, np.float32))  # (T, N, C)
        with tf.GradientTape() as outer:
            outer.watch(logits)
            _, grad = self._loss_and_grad(logits, labels, label_length, logit_length,
                                          weights, blank)
            directional = tf.reduce_sum(grad * v)
        return outer.gradient(directional, logits).numpy()
