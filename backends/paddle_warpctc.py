"""Backend ``warpctc``: Baidu's warp-ctc as shipped inside PaddlePaddle, in a worker process.

``paddle.nn.functional.ctc_loss`` calls warp-ctc, which applies the softmax itself: despite
the argument's name ``log_probs``, it takes logits. Conventions: time-major ``(T, N, C)``,
int32 padded labels ``(N, L)``, int64 lengths, ``blank``; the gradient comes from Paddle's
autograd w.r.t. the logits. Runs in float32 and float64.

Refused with ``UnsupportedProblem``, since warp-ctc answers them wrongly: an infeasible
target (loss 0 and a zero gradient, not inf) and an input of length 0 (inf for an empty
target, heap corruption in float64). A batch whose targets are all empty crashes the
process; that is left to the worker isolation (a ``crashed`` row), since it corrupts nothing
first. What warp-ctc gets wrong on cases of the library is in ``cases/known_issues.toml``.
It runs isolated because Paddle cannot be imported into a process that imported TensorFlow.
"""
from __future__ import annotations

import warnings

import numpy as np

from ctcbench.core.problem import CTCProblem
from ctcbench.runtime.protocol import BackendResult, UnsupportedProblem
from ctcbench.runtime.threads import requested

from ._thirdparty import check_dtype, padded_labels, refuse_infeasible, refuse_neg_inf, require


class WarpctcBackend:
    """warp-ctc through paddle.nn.functional.ctc_loss on the CPU."""

    name = "warpctc"
    clears_padded_frames = True  # its framework gets logit 0 there (clean_logits)
    isolated = True
    dtypes = ("float32", "float64")
    packages = ("paddle",)  # import names whose versions a run records

    def __init__(self):
        require(("paddle",), extra="paddle")
        self.paddle = None

    def prepare(self) -> None:
        """Import Paddle on the CPU."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # "No ccache found" and the like, at import
            import paddle
        paddle.set_device("cpu")
        n = requested()
        if n is not None and hasattr(paddle, "set_num_threads"):
            paddle.set_num_threads(n)
        self.paddle = paddle

    def run(self, problem: CTCProblem, *, grad_weights=None) -> BackendResult:
        """``grad_weights (N,)``: upstream gradient per loss (default 1)."""
        check_dtype(problem, self.name, self.dtypes)
        refuse_neg_inf(problem, self.name, "warp-ctc returns a finite loss and a wrong gradient "
                       "for a target through a probability-0 label")
        empty = np.flatnonzero(problem.input_lengths == 0)
        if len(empty):
            raise UnsupportedProblem(
                f"warpctc mishandles an input of length 0 (samples {empty[:5].tolist()}): inf "
                f"for an empty target, and heap corruption in float64")
        refuse_infeasible(problem, self.name, "warp-ctc returns loss 0 and a zero gradient")
        if self.paddle is None:
            self.prepare()
        paddle = self.paddle
        logits = paddle.to_tensor(problem.clean_logits(np.dtype(problem.dtype)),
                                  stop_gradient=False)  # (T, N, C)
        labels, _ = padded_labels(problem)  # (N, L') int32
        loss = paddle.nn.functional.ctc_loss(
            logits, paddle.to_tensor(labels), paddle.to_tensor(problem.input_lengths),
            paddle.to_tensor(problem.target_lengths), blank=problem.blank,
            reduction="none").reshape([-1])  # (N,)
        weights = (np.ones(problem.shape[1]) if grad_weights is None
                   else np.asarray(grad_weights, np.float64))
        (loss * paddle.to_tensor(weights.astype(problem.dtype))).sum().backward()
        grad = logits.grad.numpy()  # (T, N, C)
        return BackendResult(loss.numpy().reshape(-1), grad, compute_dtype=str(grad.dtype),
                             notes=["logits passed as paddle's log_probs: warp-ctc applies "
                                    "the softmax itself"])

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        """``paddle.nn.functional.ctc_loss(logits, labels, input_lengths, target_lengths,
        blank=blank, reduction="none")`` on the arrays as given (the logits as its
        ``log_probs``: warp-ctc applies the softmax itself; lengths int64 as given, labels
        int32 as the adapter passes them, so a label outside int32 is UnsupportedProblem),
        and paddle's gradient of the loss's sum w.r.t. the logits."""
        targets = np.asarray(targets)
        int32 = np.iinfo(np.int32)
        if targets.size and (targets.min() < int32.min or targets.max() > int32.max):
            raise UnsupportedProblem(f"{self.name}: warp-ctc takes int32 labels, and one "
                                     "does not fit in int32")
        if self.paddle is None:
            self.prepare()
        paddle = self.paddle
        x = paddle.to_tensor(np.asarray(logits), stop_gradient=False)  # (T, N, C)
        loss = paddle.nn.functional.ctc_loss(
            x, paddle.to_tensor(targets.astype(np.int32)), paddle.to_tensor(input_lengths),
            paddle.to_tensor(target_lengths), blank=blank, reduction="none")
        loss.sum().backward()
        return loss.numpy(), None if x.grad is None else x.grad.numpy()
