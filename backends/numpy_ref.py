"""Backend ``numpy``: the float64 log-space forward-backward reference (Graves et al. 2006).

Pure NumPy, no torch. Vectorised over the batch and the extended-label states; the only
Python loop is over time. Log space throughout, so it stays exact for T in the thousands
where a probability-space recursion underflows.

Recursions, per sample, over the extended labels ``z`` (``S = 2L + 1`` states: blank,
l1, blank, l2, ..., blank) with emissions ``e[t, s] = log p_t(z_s)``::

    alpha[0, s] = e[0, s]                            for s in {0, 1}
    alpha[t, s] = e[t, s] + lse(alpha[t-1, s], alpha[t-1, s-1], alpha[t-1, s-2] if skip[s])
    beta[T_n - 1, s] = 0                             for s in {S_n - 1, S_n - 2}
    beta[t, s] = lse(beta[t+1, s] + e[t+1, s], ... s+1, ... s+2 if skip[s+2])

where ``skip[s]`` holds for a label state whose label differs from the one two states
back. ``beta`` excludes the emission at ``t``, so ``alpha + beta`` is the log-probability of
all paths through state ``s`` at frame ``t``, and the loss is ``-log Z`` with
``Z = sum_s exp(alpha[t, s] + beta[t, s])`` for any valid ``t``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ctcbench.problem import CTCProblem

NEG_INF = -np.inf


@dataclass
class ForwardBackward:
    """Everything the reference computes for one problem.

    loss:        ``(N,)`` float64, ``+inf`` where the target is infeasible.
    log_alpha:   ``(T, N, S)`` forward variables (log).
    log_beta:    ``(T, N, S)`` backward variables (log), excluding the emission at ``t``.
    extended:    ``(N, S)`` extended label sequence (blank-interleaved targets).
    state_posterior: ``(T, N, S)`` P(state s at frame t | target); zero where not defined.
    class_posterior: ``(T, N, C)`` gamma, the state posterior summed per class.
    """

    loss: np.ndarray
    log_alpha: np.ndarray
    log_beta: np.ndarray
    extended: np.ndarray
    state_posterior: np.ndarray
    class_posterior: np.ndarray


def extended_labels(targets: np.ndarray, target_lengths: np.ndarray, blank: int):
    """``(N, S)`` blank-interleaved labels, ``(N, S)`` valid-state mask, ``(N, S)`` skip mask."""
    N, L = targets.shape
    S = 2 * L + 1
    ext = np.full((N, S), blank, dtype=np.int64)
    ext[:, 1::2] = targets
    valid = np.arange(S)[None, :] < (2 * target_lengths + 1)[:, None]  # (N, S)
    skip = np.zeros((N, S), dtype=bool)
    skip[:, 3::2] = targets[:, 1:] != targets[:, :-1]  # label state s may come from s - 2
    return ext, valid, skip & valid


def forward_backward(log_probs: np.ndarray, targets: np.ndarray, input_lengths: np.ndarray,
                     target_lengths: np.ndarray, *, blank: int = 0) -> ForwardBackward:
    """Run the log-space forward-backward on normalised ``log_probs (T, N, C)`` float64.

    ``targets`` is padded ``(N, L)``; frames past ``input_lengths`` are never read.
    """
    T, N, C = log_probs.shape
    ext, valid, skip = extended_labels(targets, target_lengths, blank)
    S = ext.shape[1]
    batch = np.arange(N)
    # (T, N, S) emissions; -inf on states past 2 * target_length + 1.
    emit = np.where(valid[None], log_probs[:, batch[:, None], ext], NEG_INF)
    skip_add = np.where(skip, 0.0, NEG_INF)  # (N, S): adds -inf where s-2 -> s is not allowed
    skip_add_back = np.full((N, S), NEG_INF)  # (N, S): for beta, s+2 -> s allowed iff skip[s+2]
    skip_add_back[:, :-2] = skip_add[:, 2:]

    # alpha and beta are padded by two -inf states on the side the recursion reads from, so
    # the shifted views are plain slices (no per-step temporaries for the shifts).
    alpha = np.full((T, N, S + 2), NEG_INF)  # state s lives at column s + 2
    beta = np.full((T, N, S + 2), NEG_INF)  # state s lives at column s
    tmp = np.empty((N, S))
    if T > 0:
        alpha[0, :, 2:4] = emit[0, :, :2]
    for t in range(1, T):
        prev = alpha[t - 1]
        np.add(prev[:, :-2], skip_add, out=tmp)
        np.logaddexp(tmp, prev[:, 1:-1], out=tmp)
        np.logaddexp(tmp, prev[:, 2:], out=tmp)
        np.add(tmp, emit[t], out=alpha[t, :, 2:])

    last_t = input_lengths - 1  # (N,)
    ends = np.zeros((N, S), dtype=bool)  # final states S_n - 1 and S_n - 2
    S_n = 2 * target_lengths + 1
    ends[batch, S_n - 1] = True
    ends[batch[S_n >= 2], (S_n - 2)[S_n >= 2]] = True
    nxt = np.empty((N, S + 2))
    for t in range(T - 1, -1, -1):
        if t < T - 1:
            np.add(beta[t + 1, :, :S], emit[t + 1], out=nxt[:, :S])
            nxt[:, S:] = NEG_INF
            np.add(nxt[:, 2:], skip_add_back, out=tmp)
            np.logaddexp(tmp, nxt[:, 1:-1], out=tmp)
            np.logaddexp(tmp, nxt[:, :S], out=beta[t, :, :S])
        starting = last_t == t  # samples whose last valid frame is t
        if starting.any():
            beta[t, starting, :S] = np.where(ends[starting], 0.0, NEG_INF)

    alpha, beta = alpha[:, :, 2:], beta[:, :, :S]
    loss = np.where(target_lengths == 0, 0.0, np.inf)  # the answer for input_length 0
    has_frames = input_lengths > 0
    if has_frames.any():
        final = alpha[last_t[has_frames], batch[has_frames]]  # (n, S)
        log_z = np.logaddexp.reduce(np.where(ends[has_frames], final, NEG_INF), axis=1)
        loss[has_frames] = -log_z

    frame_ok = (np.arange(T)[:, None] < input_lengths[None, :]) & np.isfinite(loss)[None, :]
    log_post = alpha + beta + np.where(np.isfinite(loss), loss, 0.0)[None, :, None]
    state_post = np.where(frame_ok[..., None], np.exp(log_post), 0.0)  # (T, N, S)
    # Scatter states onto classes: one bincount over flat (t, n, class) indices.
    flat = (np.arange(T)[:, None, None] * N + batch[None, :, None]) * C + ext[None]  # (T, N, S)
    class_post = np.bincount(flat.ravel(), weights=state_post.ravel(),
                             minlength=T * N * C).reshape(T, N, C)
    return ForwardBackward(loss, alpha, beta, ext, state_post, class_post)


class NumpyBackend:
    """Exact float64 reference; takes logits, applies log_softmax itself."""

    name = "numpy"

    def run(self, problem: CTCProblem, *, grad_weights=None) -> "NumpyResult":
        """``grad_weights (N,)``: upstream gradient per loss (default 1), scales the gradient."""
        log_probs = problem.log_probs()  # (T, N, C) float64, padded frames zeroed
        fb = forward_backward(log_probs, problem.targets, problem.input_lengths,
                              problem.target_lengths, blank=problem.blank)
        keep = problem.frame_mask & np.isfinite(fb.loss)[None, :]  # (T, N)
        # d(-log Z)/d logits = softmax - gamma on valid frames of feasible samples.
        grad = np.where(keep[..., None], np.exp(log_probs) - fb.class_posterior, 0.0)
        if grad_weights is not None:
            grad = grad * np.asarray(grad_weights, dtype=np.float64)[None, :, None]
        return NumpyResult(fb.loss, grad, fb)


@dataclass
class NumpyResult:
    """The backend result plus the forward-backward tables (alignment posteriors)."""

    loss: np.ndarray  # (N,)
    grad_logits: np.ndarray  # (T, N, C)
    fb: ForwardBackward = field(repr=False)
    compute_dtype: str = "float64"
