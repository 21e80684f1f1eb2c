"""Backend ``optax``: ``optax.ctc_loss`` (JAX), jitted, run in a worker process.

Conventions optax wants: logits batch-major ``(N, T, C)`` (it applies log_softmax itself),
lengths as 0/1 padding masks ``(N, T)`` and ``(N, L)``, ``blank_id``, per-sequence loss.
float64 needs ``jax_enable_x64``, which the adapter turns on in its process (its own worker,
unless run in-process). The function is jitted once per shape: un-jitted it is hundreds of
times slower. Compilation costs seconds per shape, so problems are padded up to the next
power of four in T, N, L and C (extra frames and labels masked, extra samples weigh 0,
extra classes have probability 0) and the blank is moved to class 0: every small case
shares one compiled function. ``run(problem, exact_shape=True)`` (what ``ctcbench bench``
asks for) pads nothing and compiles for the problem's own shape, which is what a user who
jits ``optax.ctc_loss`` for their batch shape gets; ``kernel(problem)`` (what the bench times)
is that function on arrays already on the device, without the per-call NumPy conversions.

Trap: optax scores log(0) as ``log_epsilon = -1e5``, so an infeasible target gets a finite
loss near 1e5 with a non-zero gradient instead of inf; such problems are refused.
"""
from __future__ import annotations

import numpy as np

from ctcbench.core.problem import CTCProblem
from ctcbench.runtime.protocol import BackendResult, UnsupportedProblem

from ._thirdparty import (check_dtype, jax_threads, padded_labels, refuse_infeasible,
                          refuse_neg_inf, require)


class OptaxBackend:
    """optax.ctc_loss under jax.jit; computes in the problem's dtype (float32 or float64)."""

    name = "optax"
    clears_padded_frames = True  # its framework gets logit 0 there (clean_logits)
    isolated = True
    dtypes = ("float32", "float64")
    packages = ("jax", "jaxlib", "optax")  # import names whose versions a run records
    _library = "optax"  # who answers wrongly, in refusals

    def __init__(self):
        require(("jax", "optax"), extra="jax")
        self._fn = None

    def prepare(self) -> None:
        """Import JAX with float64 enabled and build the jitted loss-and-gradient."""
        jax_threads()
        import jax
        import optax
        jax.config.update("jax_enable_x64", True)

        def total(logits, logit_pad, labels, label_pad, weights, blank):
            loss = optax.ctc_loss(logits, logit_pad, labels, label_pad, blank_id=blank)  # (N,)
            return (weights * loss).sum(), loss

        self._fn = jax.jit(jax.value_and_grad(total, has_aux=True), static_argnums=5)

    def run(self, problem: CTCProblem, *, grad_weights=None,
            exact_shape: bool = False) -> BackendResult:
        """``grad_weights (N,)``: upstream gradient per loss (default 1). ``exact_shape``:
        compile for the problem's own (T, N, L, C), no bucket padding (for timing)."""
        args, rename, (Tb, Nb, Lb, Cb) = self._inputs(problem, grad_weights, exact_shape)
        T, N, C, _ = problem.shape
        (_, loss), grad = self._fn(*args, 0)
        loss = np.asarray(loss)[:N]  # (N,)
        grad = np.asarray(grad)[:N, :T, :C][..., rename].transpose(1, 0, 2)  # (T, N, C)
        return BackendResult(loss, grad, compute_dtype=str(grad.dtype),
                             notes=[f"jax.jit on (T, N, L, C) = ({Tb}, {Nb}, {Lb}, {Cb})"
                                    + (" (exact shape)" if exact_shape else " (bucket)")])

    def kernel(self, problem: CTCProblem):
        """What `bench` times: the jitted loss and gradient of the exact shape on inputs
        already on the JAX device, waited for (``block_until_ready``); returns
        ``(loss (N,), grad (N, T, C) with the blank moved to class 0)``."""
        import jax
        args, _, _ = self._inputs(problem, None, exact_shape=True)
        args = [jax.device_put(a) for a in args]

        def call():
            (_, loss), grad = self._fn(*args, 0)
            return loss, grad.block_until_ready()
        return call

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        """``optax.ctc_loss`` (its own log_softmax) on the logits as given, batch-major, and
        the labels as given, with ``blank_id=blank``; the lengths become the 0/1 padding masks
        optax takes, so a length < 0 or past its axis (T for inputs, S for targets) cannot be
        expressed: UnsupportedProblem. No jit (each call traces anew). Returns loss ``(N,)``
        and the gradient of its sum w.r.t. the logits, back in the logits' ``(T, N, C)``."""
        if self._fn is None:
            self.prepare()
        import jax
        import optax
        logits, targets = np.asarray(logits), np.asarray(targets)
        T, S = logits.shape[0], targets.shape[1]
        for what, lengths, most in (("input", input_lengths, T), ("target", target_lengths, S)):
            bad = np.flatnonzero((np.asarray(lengths) < 0) | (np.asarray(lengths) > most))
            if len(bad):
                raise UnsupportedProblem(
                    f"{self.name}: optax.ctc_loss takes padding masks, not lengths, so "
                    f"{what} length < 0 or > {most} cannot be expressed (samples "
                    f"{bad[:5].tolist()})")
        logit_pad = (np.arange(T)[None, :] >= np.asarray(input_lengths)[:, None])  # (N, T)
        label_pad = (np.arange(S)[None, :] >= np.asarray(target_lengths)[:, None])  # (N, S)

        def total(x):
            loss = optax.ctc_loss(x, logit_pad.astype(x.dtype), targets,
                                  label_pad.astype(x.dtype), blank_id=blank)  # (N,)
            return loss.sum(), loss

        (_, loss), grad = jax.value_and_grad(total, has_aux=True)(logits.transpose(1, 0, 2))
        return np.asarray(loss), np.asarray(grad).transpose(1, 0, 2)

    def _inputs(self, problem: CTCProblem, grad_weights, exact_shape: bool):
        """``(the jitted function's NumPy arguments, class renaming, padded (T, N, L, C))``."""
        check_dtype(problem, self.name, self.dtypes)
        refuse_neg_inf(problem, self.name, f"{self._library} returns a NaN loss")
        refuse_infeasible(problem, self.name, f"{self._library} returns a finite loss near 1e5 "
                          "(log_epsilon) with a gradient")
        if self._fn is None:
            self.prepare()
        dtype = np.dtype(problem.dtype)
        T, N, C, _ = problem.shape
        labels, label_mask = padded_labels(problem)  # (N, L')
        Tb, Nb, Lb, Cb = padded_shape(problem, exact_shape=exact_shape)
        L = labels.shape[1]
        # Blank moved to class 0 (classes reordered, labels renamed): one compilation serves
        # every blank index. Extra classes get logit -1e30: probability exactly 0, gradient 0.
        order = np.array([problem.blank] + [c for c in range(C) if c != problem.blank])
        rename = np.argsort(order)  # old class -> new class
        logits = np.full((Nb, Tb, Cb), -1e30, dtype)
        logits[:, :, :C] = 0.0
        logits[:N, :T, :C] = problem.clean_logits(dtype)[..., order].transpose(1, 0, 2)  # (N, T, C)
        logit_pad = np.ones((Nb, Tb), dtype)
        logit_pad[:N, :T] = ~problem.frame_mask.T  # (N, T) 1 on padded frames
        label_ids = np.ones((Nb, Lb), np.int32)
        label_ids[:N, :L] = np.where(label_mask, rename[labels], 1)
        label_pad = np.ones((Nb, Lb), dtype)
        label_pad[:N, :L] = ~label_mask  # (N, L') 1 on padding
        weights = np.zeros(Nb, dtype)  # (N,) padded samples weigh nothing
        weights[:N] = 1.0 if grad_weights is None else np.asarray(grad_weights, np.float64)
        return (logits, logit_pad, label_ids, label_pad, weights), rename, (Tb, Nb, Lb, Cb)


def padded_shape(problem: CTCProblem, *, exact_shape: bool = False) -> tuple[int, int, int, int]:
    """The ``(T, N, L, C)`` the jitted function is called (and compiled) with: the problem's
    own, ``L`` at least 1, with ``exact_shape``; else each padded to its power-of-four bucket."""
    T, N, C, L = problem.shape
    L = max(L, 1)  # padded_labels keeps one label column for an empty target axis
    if exact_shape:
        return T, N, L, C
    return _bucket(T, 16), _bucket(N, 4), _bucket(L, 4), _bucket(C, 8)


def _bucket(n: int, least: int) -> int:
    """The next power of four >= n, at least ``least``: few shapes, few compilations."""
    size = least
    while size < n:
        size *= 4
    return size
