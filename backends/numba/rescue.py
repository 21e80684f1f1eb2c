"""The last path of backend ``numba``, for samples neither the fast path nor the blocked
rescue (``blocks``) can take: the log-space forward-backward (:func:`sample_log_space`),
float64. Called by :mod:`ctcbench.backends.numba.kernels`; design and measurements in
docs/numba.md (item 4).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ctcbench.backends.numba.primitives import LOG_JIT, exp_nonpositive, lse3
from ctcbench.backends.numba.rows import JIT, row_max, row_sum, segment_frames

@njit(**JIT)
def log_emissions(x, lse_t, lab, lp):
    """``lp (S,)``: log-probability of each extended state's class, ``x[lab[s]] - lse_t``."""
    for s in range(lab.shape[0]):
        lp[s] = np.float64(x[lab[s]]) - lse_t


@njit(**LOG_JIT)
def log_forward_row(p, a, lp, enter2):
    """Log forward row ``a (S + 2,)`` from ``p``: state ``s`` is at ``[s + 2]``, ``[0:2]`` hold
    -inf; ``s`` <- ``s``, ``s - 1``, and ``s - 2`` where ``enter2[s]`` is 0 (else -inf)."""
    a[0] = -np.inf
    a[1] = -np.inf
    for s in range(lp.shape[0]):
        a[s + 2] = lp[s] + lse3(p[s + 2], p[s + 1], p[s] + enter2[s])


@njit(**LOG_JIT)
def log_backward_row(g, b, exit2):
    """Log backward row ``b (S + 2,)`` (state ``s`` at ``[s]``, ``[S:]`` -inf) from ``g``,
    the next frame's log beta plus its log emissions: ``s`` -> ``s``, ``s + 1``, and
    ``s + 2`` where ``exit2[s]`` is 0 (else -inf)."""
    for s in range(b.shape[0] - 2):
        b[s] = lse3(g[s], g[s + 1], g[s + 2] + exit2[s])


@njit(**JIT)
def shift_to_max(row, start, stop):
    """Subtract the largest of ``row[start:stop]`` from it and return that (0 if all are
    -inf), so that log rows stay near 0: their values would otherwise grow with T, and with
    them the rounding of every ``m + log(...)``."""
    m = row_max(row[start:stop])
    if m == -np.inf:
        return 0.0
    for s in range(start, stop):
        row[s] -= m
    return m


@njit(**JIT)
def log_posterior_row(a, b, post):
    """``post (S,)`` proportional to ``exp(a[s + 2] + b[s])``, largest 1; returns its sum."""
    for s in range(post.shape[0]):
        post[s] = a[s + 2] + b[s]
    m = row_max(post)
    for s in range(post.shape[0]):
        post[s] = exp_nonpositive(post[s] - m)
    return row_sum(post, 0, post.shape[0])


@njit(**JIT)
def sample_log_space(logits, grad, n, gn, tg, T_n, L, blank, w):
    """Log-space forward-backward of sample ``n`` (feasible, ``T_n >= 1``): writes its
    gradient rows from scratch and returns its loss. Checkpointed like :func:`sample_fast`
    (the same segments): forward rows are kept for one segment at a time, the log-emissions
    recomputed from the logits and each frame's log-sum-exp, so memory stays bounded."""
    S = 2 * L + 1
    C = logits.shape[2]
    K = segment_frames(T_n, L)
    n_seg = -(-T_n // K)
    lab = np.empty(S, dtype=np.int64)  # (S,) class of each extended state
    enter2 = np.full(S, -np.inf)  # (S,) 0 where state s may be entered from s - 2
    for s in range(S):
        lab[s] = blank if s % 2 == 0 else tg[s // 2]
        if s >= 3 and s % 2 == 1 and tg[s // 2] != tg[s // 2 - 1]:
            enter2[s] = 0.0
    exit2 = np.full(S, -np.inf)  # (S,) 0 where state s may go on to s + 2
    exit2[:S - 2] = enter2[2:]
    lse = np.empty(T_n)  # (T_n,) log-sum-exp of each frame's logits
    lp = np.empty(S)  # (S,) one frame's log emissions
    A = np.empty((K, S + 2))  # (K, S + 2) one segment's log forward rows (see log_forward_row)
    first = np.empty((n_seg, S + 2))  # (n_seg, S + 2) each segment's first row
    i = 0  # row of frame t in A
    log_shift = 0.0  # what shift_to_max took off the forward rows so far
    for t in range(T_n):
        x = logits[t, n]
        m = row_max(x)
        total = 0.0
        for c in range(C):
            total += exp_nonpositive(np.float64(x[c]) - m)
        lse_t = m + math.log(total)
        lse[t] = lse_t
        row = grad[t, gn]
        for c in range(C):
            row[c] = w * exp_nonpositive(np.float64(x[c]) - lse_t)
        log_emissions(x, lse[t], lab, lp)
        if t == 0:
            A[0, :] = -np.inf
            A[0, 2] = lp[0]
            if S > 1:
                A[0, 3] = lp[1]
        else:
            prev = i
            i = i + 1 if i + 1 < K else 0
            log_forward_row(A[prev], A[i], lp, enter2)
        log_shift += shift_to_max(A[i], 2, S + 2)
        if i == 0:
            first[t // K] = A[0]
    last = A[i]
    log_z = last[S + 1]
    if S > 1:
        log_z = np.logaddexp(log_z, last[S])
    if not log_z > -np.inf:  # no path: a comparison, see softmax_frame
        for t in range(T_n):
            grad[t, gn, :] = 0.0
        return np.inf
    log_z += log_shift
    # backward: nb holds log beta at frame t + 1 plus its log emissions (g), cb beta at t;
    # both (S + 2,) with state s at [s] and [S:S + 2] = -inf
    nb = np.full(S + 2, -np.inf)
    cb = np.full(S + 2, -np.inf)
    post = np.empty(S)  # (S,) one frame's state posterior, normalised to sum to 1 exactly:
    # exp(la + lb - log_z) alone drifts off 1 on long, peaked inputs
    cb[S - 1] = 0.0
    if S > 1:
        cb[S - 2] = 0.0
    for seg in range(n_seg - 1, -1, -1):
        t0 = seg * K
        if seg < n_seg - 1:  # recompute this segment's rows from its first one
            A[0] = first[seg]
            for k in range(1, K):
                log_emissions(logits[t0 + k, n], lse[t0 + k], lab, lp)
                log_forward_row(A[k - 1], A[k], lp, enter2)
                shift_to_max(A[k], 2, S + 2)  # as in the first pass; posteriors ignore it
        for t in range(min(t0 + K, T_n) - 1, t0 - 1, -1):
            if t < T_n - 1:  # log beta at t from nb: log beta + log emissions at t + 1
                log_backward_row(nb, cb, exit2)
                shift_to_max(cb, 0, S)  # a constant per row: the posteriors ignore it
            scale = w / log_posterior_row(A[t - t0], cb, post)
            row = grad[t, gn]
            for s in range(S):
                row[lab[s]] -= post[s] * scale
            log_emissions(logits[t, n], lse[t], lab, lp)
            for s in range(S):
                nb[s] = cb[s] + lp[s]
    return -log_z
