"""Backend ``numpy``: the exact float64 reference, :mod:`ctcbench.core.reference`."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ctcbench.core.checkpointed import class_posteriors
from ctcbench.core.ctcmath import log_softmax
from ctcbench.core.extended import extended_labels, gather_states, scatter_states
from ctcbench.core.memory import require_memory, uses_tables
from ctcbench.core.problem import CTCProblem
from ctcbench.core.reference import ForwardBackward, forward_backward_probs
from ctcbench.runtime.protocol import grad_weights_array


class NumpyBackend:
    """Exact float64 reference; takes logits, applies log_softmax itself."""

    name = "numpy"

    def run(self, problem: CTCProblem, *, grad_weights=None) -> "NumpyResult":
        """``grad_weights (N,)``: upstream gradient per loss (default 1), scales the gradient."""
        T, N, C, L = problem.shape
        require_memory(T, N, C, L)  # one ValueError with the estimate, before any work
        frame_mask = problem.frame_mask  # (T, N)
        # (T, N, C) working buffer; C order, since the scatter below writes through a flat view
        probs = np.array(problem.logits, dtype=np.float64, order="C")
        probs[~frame_mask] = 0.0  # padded frames may hold NaN
        probs -= probs.max(axis=2, keepdims=True)
        np.exp(probs, out=probs)
        probs *= 1.0 / probs.sum(axis=2, keepdims=True)  # softmax, (T, N, C)
        ext, _, _ = extended_labels(problem.targets, problem.target_lengths, problem.blank)
        if not uses_tables(T, N, L):  # checkpointed: probs becomes softmax - gamma in place
            loss, log_space, grad = class_posteriors(
                probs, lambda idx: log_softmax(np.where(frame_mask[:, idx, None],
                                                        problem.logits[:, idx], 0.0)),
                problem.targets, problem.input_lengths, problem.target_lengths,
                blank=problem.blank, gradient=True)
            fb = ForwardBackward.without_tables(loss, ext, None, log_space)
            return self._finish(fb, grad, frame_mask, grad_weights)
        fb = forward_backward_probs(gather_states(probs, ext),  # (T, N, S) emissions
                               problem.targets, problem.input_lengths,
                               problem.target_lengths, blank=problem.blank, C=C,
                               log_probs_of=lambda idx: problem.log_probs()[:, idx])
        # d(-log Z)/d logits = softmax - gamma on valid frames of feasible samples.
        grad = probs
        scatter_states(grad, fb.state_posterior, problem.targets, blank=problem.blank,
                       subtract=True)
        return self._finish(fb, grad, frame_mask, grad_weights)

    @staticmethod
    def _finish(fb: ForwardBackward, grad: np.ndarray, frame_mask: np.ndarray,
                grad_weights) -> "NumpyResult":
        """Zero the gradient of padded frames and infeasible samples; apply the weights."""
        grad[~(frame_mask & np.isfinite(fb.loss)[None, :])] = 0.0
        if grad_weights is not None:
            grad *= grad_weights_array(grad_weights, grad.shape[1])[None, :, None]
        return NumpyResult(fb.loss, grad, fb)

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        """This backend's own entry point is ctcbench's: a CTCProblem of the arrays (which
        raises ValueError for malformed input), then ``run``."""
        result = self.run(CTCProblem(logits, targets, input_lengths, target_lengths, blank=blank))
        return result.loss, result.grad_logits


@dataclass
class NumpyResult:
    """The backend result plus the forward-backward tables (alignment posteriors)."""

    loss: np.ndarray  # (N,)
    grad_logits: np.ndarray  # (T, N, C)
    fb: ForwardBackward = field(repr=False)
    compute_dtype: str = "float64"
