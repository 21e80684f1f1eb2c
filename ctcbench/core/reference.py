"""The float64 forward-backward reference (Graves et al. 2006) every backend is judged against.

The ``numpy`` backend (``backends/numpy_ref.py``) wraps it. Pure NumPy, no torch, vectorised
over the batch and the ``S = 2L + 1`` extended states (blank, l1, blank, ..., blank); the only
Python loops are over time (one shared loop for small batches, see ``_one_loop``). ``beta``
excludes the emission at ``t``, so ``alpha * beta`` is the mass of all paths through state
``s`` at frame ``t``; it sums to ``Z`` over the states of every valid frame, and the loss is
``-log Z``. The recursions, and why both paths below are exact: docs/bench.md.

Two exact paths:
  * fast (whenever it is safe): probabilities, rows divided by their sum every
    ``RESCALE_EVERY`` frames and the logs of the sums added up (Rabiner's scaling);
  * log space (``logaddexp``), for the samples where the fast path could lose mass to
    underflow: a frame normaliser or a frame's ``sum_s alpha * beta`` below ``SAFE_FLOOR``.
Problems whose full tables would exceed ``memory.TABLE_BYTES_LIMIT`` run checkpointed
(:mod:`ctcbench.core.checkpointed`); one whose estimate exceeds the memory free now is one
ValueError, raised before any work. Every valid frame's posterior is divided by its own sum, so
gradient rows sum to 0 and entries lie in ``[-1, 1]`` at any logit scale; a ``-inf``
log-probability is probability 0 (gradient 0; loss ``+inf`` and gradient 0 when every alignment
needs it). Padded frames and infeasible samples get 0, never NaN.
"""
from __future__ import annotations

import functools

import numpy as np

from ctcbench.core.checkpointed import class_posteriors, normalised_exp
from ctcbench.core.ctcmath import feasible
from ctcbench.core.extended import end_states, extended_labels, gather_states, scatter_states
from ctcbench.core.memory import require_memory, uses_tables


NEG_INF = -np.inf
SAFE_FLOOR = 1e-250  # below this, a scaled quantity may have lost mass to underflow
RESCALE_EVERY = 4  # frames between rescalings of the scaled recursions
# Up to this many states per frame (N * S), forward and backward share one time loop: half
# the NumPy calls, a few extra passes over (T, N, S); about where the two cost the same.
ONE_LOOP_MAX_STATES = 1024


class ForwardBackward:
    """Everything the reference computes for one problem.

    loss:        ``(N,)`` float64, ``+inf`` where the target is infeasible.
    extended:    ``(N, S)`` extended label sequence (blank-interleaved targets).
    state_posterior: ``(T, N, S)`` P(state s at frame t | target); zero where not defined.
    log_alpha:   ``(T, N, S)`` forward variables (log), computed on first access.
    log_beta:    ``(T, N, S)`` backward variables (log), excluding the emission at ``t``;
                 computed on first access.
    class_posterior: ``(T, N, C)`` gamma, the state posterior summed per class; computed on
                 first access.
    log_space:   ``(N,)`` bool, samples computed by the log-space path.
    """

    def __init__(self, loss, extended, state_posterior, targets, blank, C, scaled_tables,
                 log_tables, log_space):
        self.loss = loss
        self.extended = extended
        self.state_posterior = state_posterior
        self.log_space = log_space
        self._targets, self._blank, self._C = targets, blank, C  # for class_posterior
        self._scaled = scaled_tables  # (alpha_hat, log_scale_a, beta_hat, log_scale_b)
        self._log = log_tables  # {n: (log_alpha (T, S), log_beta (T, S))} for log-space samples

    @classmethod
    def without_tables(cls, loss, extended, class_posterior, log_space) -> "ForwardBackward":
        """The result of a checkpointed run: loss and, unless None, ``(T, N, C)`` gamma; the
        ``(T, N, S)`` tables were never kept, and asking for them raises ValueError."""
        fb = cls(loss, extended, None, None, None, None, None, {}, log_space)
        if class_posterior is not None:
            fb.__dict__["class_posterior"] = class_posterior  # read first by cached_property
        return fb

    def _log_table(self, which: int) -> np.ndarray:
        if self._scaled is None:
            raise ValueError(f"{('log_alpha', 'log_beta')[which]}: expected a problem whose "
                             "(T, N, S) tables fit in memory, got a checkpointed run")
        hat, log_scale = self._scaled[2 * which], self._scaled[2 * which + 1]
        with np.errstate(divide="ignore"):
            out = np.log(hat) + log_scale[..., None]  # (T, N, S)
        for n, tables in self._log.items():
            out[:, n] = tables[which]
        return out

    @functools.cached_property
    def log_alpha(self) -> np.ndarray:
        return self._log_table(0)

    @functools.cached_property
    def log_beta(self) -> np.ndarray:
        return self._log_table(1)

    @functools.cached_property
    def class_posterior(self) -> np.ndarray:
        if self.state_posterior is None:
            raise ValueError("class_posterior: expected a run that kept it, got a checkpointed "
                             "run that wrote the gradient in place")
        T, N, _ = self.state_posterior.shape
        out = np.zeros((T, N, self._C))  # (T, N, C)
        scatter_states(out, self.state_posterior, self._targets, blank=self._blank)
        return out


def _reverse_per_sample(x: np.ndarray, input_lengths: np.ndarray, S_n: np.ndarray,
                        full: bool) -> np.ndarray:
    """``x (T, N, S)`` with each sample's valid frames and states reversed:
    ``out[t, n, s] = x[T_n - 1 - t, n, S_n - 1 - s]``, zero outside them."""
    if full:
        return x[::-1, :, ::-1]
    T, N, S = x.shape
    tt = input_lengths[None, :] - 1 - np.arange(T)[:, None]  # (T, N)
    ss = S_n[:, None] - 1 - np.arange(S)[None, :]  # (N, S)
    inside = (tt >= 0)[:, :, None] & (ss >= 0)[None]  # (T, N, S)
    got = x[np.maximum(tt, 0)[:, :, None], np.arange(N)[None, :, None], np.maximum(ss, 0)[None]]
    return np.where(inside, got, 0.0)


def _one_loop(emit: np.ndarray, skip: np.ndarray, input_lengths: np.ndarray,
              target_lengths: np.ndarray):
    """Forward and backward in probability space, rescaled every ``RESCALE_EVERY`` frames,
    in one time loop (for small batches, where NumPy's per-call cost dominates).

    ``emit (T, N, S)`` emission probabilities (zero on invalid states). The backward pass is
    the forward recursion of the reversed problem (frames and states reversed per sample), so
    both run in one time loop over a stacked ``(2N, S)`` batch: half the NumPy calls, which is
    what small problems pay for. Each step stores the pre-emission sum ``pre[t]`` (the sum
    over allowed predecessors); ``alpha[t] = pre[t] * e[t]`` and the backward variables,
    which exclude the emission at ``t``, are the reversed problem's ``pre`` read backwards.

    Returns ``alpha_hat, log_scale_a, beta_hat, log_scale_b, min_norm`` where
    ``log alpha = log alpha_hat + log_scale_a[..., None]`` (same for beta) on valid frames
    and ``min_norm (N,)`` is the smallest normaliser a sample met. A row sum can grow at
    most 3x per frame, so between rescalings it stays below ``3 ** RESCALE_EVERY``.
    """
    T, N, S = emit.shape
    S_n = 2 * target_lengths + 1
    full = bool((input_lengths == T).all() and (S_n == S).all())
    skip_rev = np.zeros((N, S), dtype=bool)  # reversed: s'-2 -> s' iff skip[S_n + 1 - s']
    src = S_n[:, None] + 1 - np.arange(S)[None, :]  # (N, S)
    ok = (np.arange(S)[None, :] >= 2) & (src < S_n[:, None])
    skip_rev[ok] = skip[np.nonzero(ok)[0], src[ok]]
    skip2 = np.concatenate([skip, skip_rev]).astype(np.float64)  # (2N, S)
    emit2 = np.concatenate([emit, _reverse_per_sample(emit, input_lengths, S_n, full)],
                           axis=1)  # (T, 2N, S)

    pre = np.empty((T, 2 * N, S))  # (T, 2N, S) pre-emission sums
    post = np.zeros((2 * N, S + 2))  # state s at column s + 2; two zero states on the left
    norm = np.ones((T, 2 * N))
    for t in range(T):
        row = pre[t]
        if t == 0:
            row[:] = 0.0
            row[:, :2] = 1.0  # paths start in states 0 and 1 (reversed: the two end states)
        else:
            np.multiply(post[:, :-2], skip2, out=row)
            row += post[:, 1:-1]
            row += post[:, 2:]
        np.multiply(row, emit2[t], out=post[:, 2:])
        if t % RESCALE_EVERY == 0:
            c = post.sum(axis=1)  # (2N,)
            norm[t] = c
            post *= (1.0 / np.maximum(c, 1e-300))[:, None]  # below SAFE_FLOOR anyway

    in_frame = np.arange(T)[:, None] < input_lengths[None, :]  # (T, N), both halves
    in_frame2 = np.concatenate([in_frame, in_frame], axis=1)  # (T, 2N)
    norm_used = np.where(in_frame2, norm, 1.0)  # rows past the last frame are never read
    with np.errstate(divide="ignore"):  # a zero normaliser marks the sample unsafe
        log_norm = np.log(norm_used)
    scale = np.zeros((T, 2 * N))  # log scale of pre[t]: normalisers applied before t
    scale[1:] = np.cumsum(log_norm, axis=0)[:-1]
    alpha = pre[:, :N] * emit  # (T, N, S)
    beta = _reverse_per_sample(pre[:, N:], input_lengths, S_n, full)  # (T, N, S)
    log_scale_b = _reverse_per_sample(scale[:, N:, None], input_lengths, np.ones(N, int),
                                      full)[:, :, 0]  # (T, N)
    checked = np.where(in_frame, np.minimum(norm_used[:, :N], norm_used[:, N:]), np.inf)
    return alpha, scale[:, :N], beta, log_scale_b, checked.min(axis=0, initial=np.inf)


def _two_loops(emit: np.ndarray, skip: np.ndarray, ends: np.ndarray,
                       input_lengths: np.ndarray):
    """Forward and backward in probability space, rescaled every ``RESCALE_EVERY`` frames,
    one time loop each (for large batches, where the per-call cost of NumPy is negligible).

    ``emit (T, N, S)`` emission probabilities (zero on invalid states). Returns
    ``alpha_hat, log_scale_a, beta_hat, log_scale_b, min_norm`` where
    ``log alpha = log alpha_hat + log_scale_a[..., None]`` (same for beta) on valid frames
    and ``min_norm (N,)`` is the smallest normaliser a sample met. A row sum can grow at
    most 3x per frame, so between rescalings it stays below ``3 ** RESCALE_EVERY``.
    """
    T, N, S = emit.shape
    skip_f = skip.astype(np.float64)  # (N, S)
    skip_back = np.zeros((N, S))
    skip_back[:, :-2] = skip_f[:, 2:]  # beta: s+2 -> s allowed iff skip[s+2]
    in_frame = np.arange(T)[:, None] < input_lengths[None, :]  # (T, N)

    # alpha is padded by two zero states on the left (state s at column s + 2), beta by two
    # on the right, so every shifted read is a plain slice.
    alpha = np.empty((T, N, S + 2))  # (T, N, S + 2)
    alpha[:, :, :2] = 0.0
    norm_a = np.ones((T, N))
    tmp = np.empty((N, S))
    if T > 0:
        alpha[0, :, 2:] = 0.0
        alpha[0, :, 2:4] = emit[0, :, :2]
    for t in range(T):
        row = alpha[t, :, 2:]
        if t > 0:
            prev = alpha[t - 1]
            np.multiply(prev[:, :-2], skip_f, out=tmp)
            tmp += prev[:, 1:-1]
            tmp += prev[:, 2:]
            np.multiply(tmp, emit[t], out=row)
        if t % RESCALE_EVERY == 0:
            c = row.sum(axis=1)  # (N,)
            norm_a[t] = c
            row *= (1.0 / np.maximum(c, 1e-300))[:, None]  # below SAFE_FLOOR anyway

    beta = np.empty((T, N, S + 2))  # (T, N, S + 2)
    beta[:, :, S:] = 0.0
    norm_b = np.ones((T, N))
    n_ends = ends.sum(axis=1)  # (N,) 1 or 2
    start_rows = np.where(ends, 1.0 / n_ends[:, None], 0.0)  # (N, S) normalised start
    starts = {int(t): np.flatnonzero(input_lengths - 1 == t) for t in np.unique(input_lengths - 1)}
    nxt = np.zeros((N, S + 2))
    for t in range(T - 1, -1, -1):
        row = beta[t, :, :S]
        if t == T - 1:
            row[:] = 0.0
        else:
            np.multiply(beta[t + 1, :, :S], emit[t + 1], out=nxt[:, :S])
            np.multiply(nxt[:, 2:], skip_back, out=tmp)
            tmp += nxt[:, 1:-1]
            np.add(tmp, nxt[:, :S], out=row)
            if t % RESCALE_EVERY == 0:
                d = row.sum(axis=1)
                norm_b[t] = d
                row *= (1.0 / np.maximum(d, 1e-300))[:, None]
        starting = starts.get(t)
        if starting is not None:
            row[starting] = start_rows[starting]
            norm_b[t, starting] = n_ends[starting]
    norm_a[~in_frame] = 1.0  # rows past the last frame hold nothing that is read
    norm_b[~in_frame] = 1.0
    with np.errstate(divide="ignore"):  # a zero normaliser marks the sample unsafe
        log_scale_a = np.cumsum(np.log(norm_a), axis=0)  # (T, N)
        log_scale_b = np.cumsum(np.log(norm_b)[::-1], axis=0)[::-1]  # (T, N)
    checked = np.where(in_frame, np.minimum(norm_a, norm_b), np.inf)
    return (alpha[:, :, 2:], log_scale_a, beta[:, :, :S], log_scale_b,
            checked.min(axis=0, initial=np.inf))


def _scaled_recursions(emit: np.ndarray, skip: np.ndarray, ends: np.ndarray,
                       input_lengths: np.ndarray, target_lengths: np.ndarray):
    """Both scaled recursions; see ``_one_loop`` and ``_two_loops`` for the contract."""
    T, N, S = emit.shape
    if N * S <= ONE_LOOP_MAX_STATES:
        return _one_loop(emit, skip, input_lengths, target_lengths)
    return _two_loops(emit, skip, ends, input_lengths)


def _log_space(log_probs: np.ndarray, targets: np.ndarray, input_lengths: np.ndarray,
               target_lengths: np.ndarray, blank: int):
    """The log-space forward-backward: ``loss (N,), log_alpha, log_beta (T, N, S)``."""
    T, N, C = log_probs.shape
    ext, valid, skip = extended_labels(targets, target_lengths, blank)
    S = ext.shape[1]
    batch = np.arange(N)
    # (T, N, S) emissions; -inf on states past 2 * target_length + 1.
    emit = np.where(valid[None], log_probs[:, batch[:, None], ext], NEG_INF)
    skip_add = np.where(skip, 0.0, NEG_INF)  # (N, S): adds -inf where s-2 -> s is not allowed
    skip_add_back = np.full((N, S), NEG_INF)  # (N, S): for beta, s+2 -> s allowed iff skip[s+2]
    skip_add_back[:, :-2] = skip_add[:, 2:]

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
    ends = end_states(target_lengths, S)
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
    return loss, alpha, beta


def forward_backward_probs(emit_probs: np.ndarray, targets: np.ndarray, input_lengths: np.ndarray,
                      target_lengths: np.ndarray, *, blank: int, C: int,
                      log_probs_of) -> ForwardBackward:
    """Shared body: ``emit_probs (T, N, S)`` gathered emission probabilities (any values on
    invalid states); ``log_probs_of(idx) -> (T, len(idx), C)`` log-probs for the samples
    that need the log-space path."""
    T, N, S = emit_probs.shape
    targets = np.where(np.arange(targets.shape[1])[None] < target_lengths[:, None], targets, blank)
    ext, valid, skip = extended_labels(targets, target_lengths, blank)
    if not valid.all():
        emit_probs *= valid[None]  # invalid states emit nothing
    ends = end_states(target_lengths, S)
    batch = np.arange(N)
    fits = feasible(targets, input_lengths, target_lengths)  # (N,)
    in_frame = np.arange(T)[:, None] < input_lengths[None, :]  # (T, N)

    alpha, log_sa, beta, log_sb, min_norm = _scaled_recursions(emit_probs, skip, ends,
                                                               input_lengths, target_lengths)
    del emit_probs  # not needed any more; callers pass it without keeping a reference
    ab = alpha * beta  # (T, N, S) mass of paths through (t, s), scaled
    ab_sum = ab.sum(axis=2)  # (T, N)
    keep = in_frame & fits[None, :]  # (T, N) frames with a defined posterior
    ab_sum_kept = np.where(keep, ab_sum, np.inf)
    with np.errstate(invalid="ignore", divide="ignore"):  # unsafe samples are redone below
        ab /= np.where(keep, ab_sum, 1.0)[..., None]
    ab[~keep] = 0.0
    state_post = ab

    loss = np.where(target_lengths == 0, 0.0, np.inf)  # the answer for input_length 0
    has = (input_lengths > 0) & fits
    last_t = input_lengths - 1
    if has.any():
        final = np.where(ends[has], alpha[last_t[has], batch[has]], 0.0).sum(axis=1)  # (n,)
        with np.errstate(divide="ignore"):
            loss[has] = -(log_sa[last_t[has], batch[has]] + np.log(final))
    # Samples whose scaled quantities went near underflow are recomputed in log space.
    smallest = np.minimum(min_norm, ab_sum_kept.min(axis=0, initial=np.inf))  # (N,)
    unsafe = has & (smallest < SAFE_FLOOR)
    log_tables = {}
    if unsafe.any():
        idx = np.flatnonzero(unsafe)
        l_loss, l_alpha, l_beta = _log_space(log_probs_of(idx), targets[idx], input_lengths[idx],
                                             target_lengths[idx], blank)
        loss[idx] = l_loss
        # Normalised per frame, not by exp(-loss): log alpha + log beta of a long or confident
        # sample carries rounding of order eps * |log alpha|, far above eps after T frames.
        post = normalised_exp(l_alpha + l_beta)  # (T, n, S); 0 where no path passes
        state_post[:, idx] = np.where(keep[:, idx, None] & np.isfinite(l_loss)[None, :, None],
                                      post, 0.0)
        log_tables = {int(n): (l_alpha[:, i], l_beta[:, i]) for i, n in enumerate(idx)}
    return ForwardBackward(loss, ext, state_post, targets, blank, C,
                           (alpha, log_sa, beta, log_sb), log_tables, unsafe)


def forward_backward(log_probs: np.ndarray, targets: np.ndarray, input_lengths: np.ndarray,
                     target_lengths: np.ndarray, *, blank: int = 0) -> ForwardBackward:
    """Run the forward-backward on normalised ``log_probs (T, N, C)`` float64.

    ``targets`` is padded ``(N, L)``; frames past ``input_lengths`` are never read.
    """
    T, N, C = log_probs.shape
    require_memory(T, N, C, targets.shape[1])
    targets = np.where(np.arange(targets.shape[1])[None] < target_lengths[:, None], targets, blank)
    ext, _, _ = extended_labels(targets, target_lengths, blank)
    in_frame = np.arange(T)[:, None] < input_lengths[None, :]  # (T, N)
    if not uses_tables(T, N, targets.shape[1]):  # checkpointed: gamma without (T, N, S) tables
        probs = np.exp(np.where(in_frame[..., None], log_probs, 0.0))  # (T, N, C)
        loss, log_space, gamma = class_posteriors(
            probs, lambda idx: log_probs[:, idx], targets, input_lengths, target_lengths,
            blank=blank)
        return ForwardBackward.without_tables(loss, ext, gamma, log_space)
    lp_ext = gather_states(log_probs, ext)  # (T, N, S)
    emit = np.exp(np.where(in_frame[..., None], lp_ext, 0.0))  # padded frames may hold NaN
    del lp_ext
    return forward_backward_probs(emit, targets, input_lengths, target_lengths, blank=blank, C=C,
                             log_probs_of=lambda idx: log_probs[:, idx])
