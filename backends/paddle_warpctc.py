"""Backend ``warpctc``: Baidu's warp-ctc as shipped inside PaddlePaddle, in a worker process.

``paddle.nn.functional.ctc_loss`` calls warp-ctc, which applies the softmax itself: despite
the argument's name ``log_probs``, it takes logits. Conventions: time-major ``(T, N, C)``,
int32 padded labels ``(N, L)``, int64 lengths, ``blank``; the gradient comes from Paddle's
autograd w.r.t. the logits. Runs in float32 and float64.

Traps, each refused rather than hidden (seen with paddlepaddle 3.3.1):
  * an infeasible target gets loss 0 and a zero gradient instead of inf;
  * an input of length 0 gets inf for an empty target (should be 0) and, in float64, heap
    corruption ("corrupted size vs. prev_size") and a hang.
A batch whose targets are all empty kills the process with SIGFPE; that one is left to the
worker isolation (recorded as ``crashed``), as it corrupts nothing first.
Why isolation: importing Paddle into a process that has imported TensorFlow segfaults.
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
    isolated = True
    dtypes = ("float32", "float64")
    packages = ("paddle",)  # import names whose versions a run records
    # Upstream behaviour seen with paddlepaddle 3.3.1 (compare marks these rows "known").
    known_issues = {
        "empty_target/*": "SIGFPE when every target in the batch is empty",
        "only_blank_class/*": "SIGFPE when every target in the batch is empty",
        # the peers' cases where every target is empty: the same crash
        "fl_ctc_empty_target/*": "SIGFPE when every target in the batch is empty",
        "torch_empty_target/*": "SIGFPE when every target in the batch is empty",
        "torch_ctc_loss_gradcheck_50_vary_zero_all/*": "SIGFPE when every target in the batch "
                                                       "is empty",
        "tf_single_class_blank_only/*": "SIGFPE when every target in the batch is empty",
        "torch_critical_target_len/float32": "float32 gradient rows sum to ~3e-4, not 0, at "
                                             "T=500, L=256 (float32 rounding; torch: within 1e-4)",
        "peaked_logits_spread300*/float32": "wrong finite loss for logits spanning 300",
        "long_target_l1000_t4000/float32": "float32 gradient error 0.33 at T=4000 (torch: 0.18)",
    }

    def __init__(self):
        require(("paddle",), extra="paddle", packages="paddlepaddle is")
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
