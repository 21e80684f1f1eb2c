"""The CUDA kernels of the ``numba-cuda`` backend (``backends/numba/cuda.py``), in numba.cuda.

Shape letters as in :mod:`ctcbench.core.problem`; ``S = 2L + 1`` extended states (blank, l1,
blank, ..., blank), of which sample ``n`` uses the first ``S_n = 2 * target_lengths[n] + 1``,
over its first ``T_n = input_lengths[n]`` frames. Everything is in log space, in the dtype of
the arrays passed (each kernel is compiled once per dtype, float32 or float64).

Three kernels, launched in this order:

``log_softmax``   one thread per ``(t, n)``: ``lp[t, n, :] = logits - logsumexp(logits)``
                  over the classes, serially: ``m + log1p(sum of exp(x - m) over the other
                  classes)``, ``m`` the top logit. Padded frames are written 0 and never read.
                  A ``-inf`` logit gives ``lp = -inf``: probability 0.
``alpha_beta``    one thread block per sample; the block's threads stride over the states,
                  with one ``cuda.syncthreads()`` per frame. ``alpha[t, n, s]`` (log forward
                  variable, emission at ``t`` included), then ``beta[t, n, s]`` (log
                  backward variable, emission at ``t`` excluded, as in
                  :mod:`ctcbench.core.reference`), each less the frames' largest
                  log-probabilities ``lp_top`` (alpha those up to ``t``, beta those after
                  ``t``): without that, ``alpha`` grows like ``t * log C`` and float32
                  rounding at that magnitude (``eps * T * log C``) passes the float32 bound on
                  long inputs (a NumPy float32 model of these kernels: 1.24x the bound on
                  the library's ``uniform_long_t2000``, 0.02x with it). The loss adds them
                  back, summed in float64: ``loss[n] = -(logsumexp(alpha[T_n - 1, n, S_n -
                  1], alpha[T_n - 1, n, S_n - 2]) + sum_t lp_top[t, n])``. No path: ``-inf``
                  stays exactly ``-inf`` through every ``logaddexp``, so the loss is ``+inf``.
``gradient``      one thread per ``(t, n)``, serially over the states:
                  ``grad[t, n, c] = w[n] * (softmax[t, n, c] - sum over states s of class c of
                  exp(alpha + beta - log_norm_t))``, with ``log_norm_t`` the logsumexp of
                  ``alpha + beta`` over the states of that frame (``-loss`` less the sum of
                  ``lp_top``, up to round-off; dividing by the frame's own sum keeps each row
                  summing to 0, as the reference does, and cancels the ``lp_top`` shift).
                  Padded frames and samples with an infinite loss: 0.

No float atomics and a fixed order of every sum, so two calls give the same bits.
"""
from __future__ import annotations

import math

from numba import cuda

NEG_INF = -math.inf


@cuda.jit(device=True)
def _lse(a, b):
    """log(exp(a) + exp(b)), exact for -inf; a and b of one dtype, and so is the result."""
    if a == NEG_INF:
        return b
    if b == NEG_INF:
        return a
    if a > b:
        return a + math.log1p(math.exp(b - a))
    return b + math.log1p(math.exp(a - b))


@cuda.jit(device=True)
def _label(targets, n, s, blank):
    """The class of extended state ``s`` of sample ``n``: blank at even ``s``."""
    if s % 2 == 0:
        return blank
    return targets[n, s // 2]


@cuda.jit
def log_softmax(logits, input_lengths, lp, lp_top):
    """``lp (T, N, C) = log_softmax(logits (T, N, C))`` on valid frames, 0 on padded ones;
    ``lp_top (T, N)`` each frame's largest log-probability (0 on padded frames)."""
    i = cuda.grid(1)
    T, N, C = logits.shape
    if i >= T * N:
        return
    t = i // N
    n = i - t * N
    if t >= input_lengths[n]:
        for c in range(C):
            lp[t, n, c] = 0
        lp_top[t, n] = 0
        return
    top = 0
    for c in range(1, C):
        if logits[t, n, c] > logits[t, n, top]:
            top = c
    m = logits[t, n, top]
    rest = m - m  # 0 in the logits' dtype: the sum of exp over every class but the top one
    for c in range(C):
        if c != top:
            rest += math.exp(logits[t, n, c] - m)
    # log1p, not log(1 + rest): a runner-up 206 below the top adds e**-206 to the sum, which
    # 1 + rest loses, and the top class's log-probability would be 0 instead of -e**-206
    shift = m + math.log1p(rest)
    for c in range(C):
        lp[t, n, c] = logits[t, n, c] - shift
    lp_top[t, n] = lp[t, n, top]


@cuda.jit
def alpha_beta(lp, lp_top, targets, input_lengths, target_lengths, blank, alpha, beta, loss):
    """One block per sample ``n = blockIdx.x``: ``alpha``, ``beta`` ``(T, N, S)`` on the
    sample's frames and states, each frame's emissions taken relative to ``lp_top[t, n]``
    (so both stay small), and ``loss (N,)``."""
    n = cuda.blockIdx.x
    tid = cuda.threadIdx.x
    step = cuda.blockDim.x
    T_n = input_lengths[n]
    L_n = target_lengths[n]
    S_n = 2 * L_n + 1
    if T_n == 0:  # no frames: only the empty target has a path (the whole block returns)
        if tid == 0:
            loss[n] = 0 if L_n == 0 else math.inf
        return

    # forward: alpha[0] from the two start states, then one frame per syncthreads
    for s in range(tid, S_n, step):
        if s < 2:
            alpha[0, n, s] = lp[0, n, _label(targets, n, s, blank)] - lp_top[0, n]
        else:
            alpha[0, n, s] = NEG_INF
    cuda.syncthreads()
    for t in range(1, T_n):
        for s in range(tid, S_n, step):
            a = alpha[t - 1, n, s]
            if s >= 1:
                a = _lse(a, alpha[t - 1, n, s - 1])
            if s >= 3 and s % 2 == 1 and targets[n, s // 2] != targets[n, s // 2 - 1]:
                a = _lse(a, alpha[t - 1, n, s - 2])  # skip over a blank between labels
            alpha[t, n, s] = a + (lp[t, n, _label(targets, n, s, blank)] - lp_top[t, n])
        cuda.syncthreads()
    if tid == 0:
        z = alpha[T_n - 1, n, S_n - 1]
        if S_n >= 2:
            z = _lse(z, alpha[T_n - 1, n, S_n - 2])
        offset = 0.0  # the frames' lp_top, added back, summed in float64
        for t in range(T_n):
            offset += lp_top[t, n]
        z = z + offset
        # +inf when no path has mass. log Z <= 0 for a probability Z; rounding can push a
        # near-certain target's (peaked logits, loss ~1e-151) just above it, to -4e-90
        loss[n] = -z if z < 0 else 0

    # backward: beta excludes the emission at t; the last frame ends in either final state
    for s in range(tid, S_n, step):
        if s >= S_n - 2:
            beta[T_n - 1, n, s] = 0
        else:
            beta[T_n - 1, n, s] = NEG_INF
    cuda.syncthreads()
    for t in range(T_n - 2, -1, -1):
        top = lp_top[t + 1, n]
        for s in range(tid, S_n, step):
            b = beta[t + 1, n, s] + (lp[t + 1, n, _label(targets, n, s, blank)] - top)
            if s + 1 < S_n:
                b = _lse(b, beta[t + 1, n, s + 1]
                         + (lp[t + 1, n, _label(targets, n, s + 1, blank)] - top))
            if s + 2 < S_n and s % 2 == 1 and targets[n, s // 2 + 1] != targets[n, s // 2]:
                b = _lse(b, beta[t + 1, n, s + 2] + (lp[t + 1, n, targets[n, s // 2 + 1]] - top))
            beta[t, n, s] = b
        cuda.syncthreads()


@cuda.jit
def gradient(lp, targets, input_lengths, target_lengths, blank, alpha, beta, loss, weights,
             grad):
    """One thread per ``(t, n)``: ``grad[t, n, :]`` w.r.t. the logits, serially over the
    classes and the states (deterministic); 0 on padded frames and infinite losses."""
    i = cuda.grid(1)
    T, N, C = grad.shape
    if i >= T * N:
        return
    t = i // N
    n = i - t * N
    if t >= input_lengths[n] or not loss[n] < math.inf:
        for c in range(C):
            grad[t, n, c] = 0
        return
    S_n = 2 * target_lengths[n] + 1
    m = alpha[t, n, 0] + beta[t, n, 0]
    for s in range(1, S_n):
        v = alpha[t, n, s] + beta[t, n, s]
        if v > m:
            m = v
    total = math.exp(alpha[t, n, 0] + beta[t, n, 0] - m)
    for s in range(1, S_n):
        total += math.exp(alpha[t, n, s] + beta[t, n, s] - m)
    log_norm = m + math.log(total)  # this frame's log Z
    for c in range(C):
        grad[t, n, c] = math.exp(lp[t, n, c])
    for s in range(S_n):
        c = _label(targets, n, s, blank)
        grad[t, n, c] -= math.exp(alpha[t, n, s] + beta[t, n, s] - log_norm)
    w = weights[n]
    if w != 1:
        for c in range(C):
            grad[t, n, c] *= w
