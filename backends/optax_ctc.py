"""Backend ``optax``: ``optax.ctc_loss`` (JAX), jitted, run in a worker process.

Conventions optax wants: logits batch-major ``(N, T, C)`` (it applies log_softmax itself),
lengths as 0/1 padding masks ``(N, T)`` and ``(N, L)``, ``blank_id``, per-sequence loss.
float64 needs ``jax_enable_x64``, which the adapter turns on in its process (its own worker,
unless run in-process). The function is jitted once per shape: un-jitted it is hundreds of
times slower. Compilation costs seconds per shape, so problems are padded up to the next
power of two in T, N and L (extra frames and labels masked, extra samples empty): cases
of similar size share one compiled function (per blank index, which optax needs static).

Trap: optax scores log(0) as ``log_epsilon = -1e5``, so an infeasible target gets a finite
loss near 1e5 with a non-zero gradient instead of inf; such problems are refused.
"""
from __future__ import annotations

import os

import numpy as np

from ctcbench.problem import CTCProblem
from ctcbench.registry import BackendResult

from ._thirdparty import check_dtype, padded_labels, refuse_infeasible, require, threads


class OptaxBackend:
    """optax.ctc_loss under jax.jit; computes in the problem's dtype (float32 or float64)."""

    name = "optax"
    isolated = True
    dtypes = ("float32", "float64")

    def __init__(self):
        require(("jax", "optax"), extra="jax", packages="jax and optax are")
        self._fn = None

    def prepare(self) -> None:
        """Import JAX with float64 enabled and build the jitted loss-and-gradient."""
        n = threads()
        if n is not None:
            os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                                  f"intra_op_parallelism_threads={n}")
        import jax
        import optax
        jax.config.update("jax_enable_x64", True)

        def total(logits, logit_pad, labels, label_pad, blank):
            loss = optax.ctc_loss(logits, logit_pad, labels, label_pad, blank_id=blank)  # (N,)
            return loss.sum(), loss

        self._fn = jax.jit(jax.value_and_grad(total, has_aux=True), static_argnums=4)

    def run(self, problem: CTCProblem) -> BackendResult:
        check_dtype(problem, self.name, self.dtypes)
        refuse_infeasible(problem, self.name,
                          "optax returns a finite loss near 1e5 (log_epsilon) with a gradient")
        if self._fn is None:
            self.prepare()
        dtype = np.dtype(problem.dtype)
        T, N, C, _ = problem.shape
        labels, label_mask = padded_labels(problem)  # (N, L')
        Tb, Nb, Lb = _bucket(T), _bucket(N), _bucket(labels.shape[1])
        logits = np.zeros((Nb, Tb, C), dtype)
        logits[:N, :T] = problem.clean_logits(dtype).transpose(1, 0, 2)  # (N, T, C)
        logit_pad = np.ones((Nb, Tb), dtype)
        logit_pad[:N, :T] = ~problem.frame_mask.T  # (N, T) 1 on padded frames
        label_ids = np.zeros((Nb, Lb), np.int32)
        label_ids[:N, : labels.shape[1]] = labels
        label_pad = np.ones((Nb, Lb), dtype)
        label_pad[:N, : labels.shape[1]] = ~label_mask  # (N, L') 1 on padding
        (_, loss), grad = self._fn(logits, logit_pad, label_ids, label_pad,
                                   problem.blank)
        loss, grad = np.asarray(loss)[:N], np.asarray(grad)[:N, :T]  # (N,), (N, T, C)
        return BackendResult(loss, grad.transpose(1, 0, 2),  # (T, N, C)
                             compute_dtype=str(grad.dtype),
                             notes=[f"jax.jit on a ({Tb}, {Nb}, {Lb}) (T, N, L) bucket"])


def _bucket(n: int) -> int:
    """The next power of two >= n (at least 1): fewer shapes, fewer compilations."""
    return 1 << max(n - 1, 0).bit_length()
