"""The compiled CTC kernels behind backend ``numba`` (``backends/numba_ctc.py``).

Shape letters as in :mod:`ctcbench.core.problem`; per sample ``T_n`` frames, ``L_n`` labels.
One call of :func:`ctc_batch` does everything for a batch: softmax of the logits, the
forward and backward recursions, the loss and the gradient w.r.t. the logits, one sample
per ``prange`` iteration (a sample is computed by one thread, start to end, so the result
does not depend on the thread count).

Fast path, in probability space (the recursions of :mod:`ctcbench.core.reference`):
  * a frame's softmax row is computed once, into the gradient row (scaled by the upstream
    weight ``w``), and its ``L_n + 1`` distinct emissions (blank, then each label) are
    gathered from it into ``E (T_n, L_n + 1)``;
  * the ``S = 2L + 1`` states are kept split, blanks then labels, so each update is a
    contiguous loop without branches; the skip transition ``s - 2 -> s`` is a 0/1 factor.
    Row layout (``2L + 3`` doubles): ``[0..L]`` blank ``j``, ``[L + 1]`` a zero,
    ``[L + 2 + j]`` label ``j``, ``[2L + 2]`` a zero;
  * every forward row is computed from the previous one divided by that row's sum, the
    log of which goes into the loss (Rabiner's scaling, one scale per frame); the backward
    rows likewise (their scales cancel in the posteriors and are not kept);
  * the backward pass meets the stored forward rows frame by frame and subtracts
    ``w * gamma`` from the gradient row, so gamma is never stored.
Samples for which a scaled quantity falls below ``SAFE_FLOOR`` (the reference's rule, see
its docstring) are redone by :func:`sample_log_space`, the log-space recursion: exact,
slower, rare.
"""
from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import njit, prange, types
from numba.extending import intrinsic

SAFE_FLOOR = 1e-250  # below this, a scaled quantity may have lost mass to underflow
# Reassociation lets LLVM vectorise the row sums; inf/NaN semantics are kept (the log-space
# path relies on -inf), so no 'nnan'/'ninf'.
FAST = {"reassoc", "contract", "nsz", "arcp"}
JIT = dict(cache=True, fastmath=FAST, error_model="numpy", nogil=True)


# -- exp of a non-positive argument, branch-free so that LLVM vectorises the softmax loop ----
@intrinsic
def _bits_to_float(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.DoubleType())
    return types.float64(types.int64), codegen


@intrinsic
def _float_to_bits(typingctx, x):
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.IntType(64))
    return types.int64(types.float64), codegen


MAGIC = 6755399441055744.0  # 1.5 * 2**52: x + MAGIC rounds x to an integer held in the low bits
LOG2E = 1.4426950408889634
LN2_HI = 0.693145751953125  # few bits, so k * LN2_HI is exact for |k| < 2**11
LN2_LO = 1.4286068203094173e-06  # ln 2 - LN2_HI


# No 'reassoc' here: it would fold (y + MAGIC) - MAGIC to y and lose the rounding.
@njit(cache=True, fastmath={"contract"}, error_model="numpy")
def exp_nonpositive(x):
    """``exp(x)`` for ``x <= 0`` (-inf included) within 1 ulp of libm's: x = k ln2 + r,
    ``|r| <= ln2 / 2``, degree-13 Taylor polynomial (truncation below 1e-17), times ``2**k``
    built from its bits in two halves so that results down to the subnormals come out."""
    x = max(x, -745.5)  # exp(-745.5) rounds to 0
    kf = x * LOG2E + MAGIC
    k = _float_to_bits(kf) - _float_to_bits(MAGIC)  # round(x / ln2) as an integer
    kf = kf - MAGIC
    r = (x - kf * LN2_HI) - kf * LN2_LO
    p = 1.0 / 6227020800.0  # 1 / 13!
    p = p * r + 1.0 / 479001600.0
    p = p * r + 1.0 / 39916800.0
    p = p * r + 1.0 / 3628800.0
    p = p * r + 1.0 / 362880.0
    p = p * r + 1.0 / 40320.0
    p = p * r + 1.0 / 5040.0
    p = p * r + 1.0 / 720.0
    p = p * r + 1.0 / 120.0
    p = p * r + 1.0 / 24.0
    p = p * r + 1.0 / 6.0
    p = p * r + 0.5
    p = p * r + 1.0
    p = p * r + 1.0
    k1 = k >> 1
    return p * _bits_to_float((k1 + 1023) << 52) * _bits_to_float((k - k1 + 1023) << 52)


@njit(**JIT)
def softmax_frame(x, row, tg, L, blank, w, E, t):
    """``row (C,) = w * softmax(x)``; ``E[t] = (p_blank, p_label_0, .., 0)``."""
    C = x.shape[0]
    m = -np.inf
    for c in range(C):
        m = max(m, np.float64(x[c]))
    s = 0.0
    for c in range(C):
        v = exp_nonpositive(np.float64(x[c]) - m)
        row[c] = v
        s += v
    inv = 1.0 / s
    E[t, 0] = row[blank] * inv
    for j in range(L):
        E[t, 1 + j] = row[tg[j]] * inv
    E[t, L + 1] = 0.0
    sc = w * inv
    for c in range(C):
        row[c] *= sc


@njit(**JIT)
def sample_fast(logits, grad, n, tg, T_n, L, blank, w, skip):
    """Scaled forward-backward of sample ``n``; returns its loss, or NaN when it is unsafe
    (the caller then redoes it in log space). ``skip (L + 1,)``: 1.0 where label ``j`` may
    be entered from label ``j - 1`` (``skip[L] = 0``)."""
    W = 2 * L + 3  # row width, see the module docstring
    E = np.empty((T_n, L + 2))  # (T_n, L + 2) emissions: blank, the labels, a zero
    A = np.empty((T_n, W))  # (T_n, W) forward rows, each scaled by the previous row's sum
    cs = np.empty(T_n)  # (T_n,) forward row sums
    log_scale = 0.0
    # t = 0: only the first blank and the first label can start a path
    softmax_frame(logits[0, n], grad[0, n], tg, L, blank, w, E, 0)
    for i in range(W):
        A[0, i] = 0.0
    A[0, 0] = E[0, 0]
    if L > 0:
        A[0, L + 2] = E[0, 1]
    c_prev = A[0, 0] + (A[0, L + 2] if L > 0 else 0.0)
    cs[0] = c_prev
    if c_prev < SAFE_FLOOR:
        return np.nan
    for t in range(1, T_n):
        softmax_frame(logits[t, n], grad[t, n], tg, L, blank, w, E, t)
        k = 1.0 / c_prev
        log_scale += math.log(c_prev)
        a, p = A[t], A[t - 1]
        eb = E[t, 0] * k
        s = 0.0
        for j in range(L + 1):  # blank j <- blank j, label j - 1
            v = eb * (p[j] + p[L + 1 + j])
            a[j] = v
            s += v
        for j in range(L):  # label j <- label j, blank j, label j - 1 where allowed
            v = E[t, 1 + j] * k * (p[L + 2 + j] + p[j] + skip[j] * p[L + 1 + j])
            a[L + 2 + j] = v
            s += v
        a[L + 1] = 0.0
        a[W - 1] = 0.0
        if s < SAFE_FLOOR:
            return np.nan
        c_prev = s
        cs[t] = s
    last = A[T_n - 1]
    final = last[L] + (last[2 * L + 1] if L > 0 else 0.0)
    if not final > 0.0:
        return np.nan
    loss = -(log_scale + math.log(final))

    # backward: nb holds beta at frame t + 1 (scaled), cb the one at t; blank j -> blank j,
    # label j; label j -> label j, blank j + 1, label j + 1 where allowed
    nb = np.zeros(W)
    cb = np.zeros(W)
    P = np.empty(max(L, 1))  # (L,) alpha * beta of each label state at frame t
    t = T_n - 1
    cb[L] = 1.0
    a = A[t]
    zb = a[L]
    zl = 0.0
    if L > 0:
        cb[2 * L + 1] = 1.0
        zl = a[2 * L + 1]
    d = 2.0 if L > 0 else 1.0
    if not zb + zl >= SAFE_FLOOR * cs[t] * d:
        return np.nan
    zinv = w / (zb + zl)
    row = grad[t, n]
    row[blank] -= zb * zinv
    if L > 0:
        row[tg[L - 1]] -= zl * zinv
    for t in range(T_n - 2, -1, -1):
        nb, cb = cb, nb
        e1 = E[t + 1]
        a = A[t]
        kb = 1.0 / d
        eb = e1[0] * kb
        d = 0.0
        zb = 0.0
        for j in range(L + 1):
            v = nb[j] * eb + nb[L + 2 + j] * e1[1 + j] * kb
            cb[j] = v
            d += v
            zb += a[j] * v
        zl = 0.0
        for j in range(L):
            v = (nb[L + 2 + j] * e1[1 + j] + skip[j + 1] * nb[L + 3 + j] * e1[2 + j]) * kb \
                + nb[j + 1] * eb
            cb[L + 2 + j] = v
            d += v
            q = a[L + 2 + j] * v
            P[j] = q
            zl += q
        z = zb + zl
        if not (d >= SAFE_FLOOR and z >= SAFE_FLOOR * cs[t] * d):
            return np.nan
        zinv = w / z
        row = grad[t, n]
        row[blank] -= zb * zinv
        for j in range(L):
            row[tg[j]] -= P[j] * zinv
    return loss


@njit(cache=True, error_model="numpy", nogil=True)
def sample_log_space(logits, grad, n, tg, T_n, L, blank, w):
    """Log-space forward-backward of sample ``n`` (feasible, ``T_n >= 1``): writes its
    gradient rows from scratch and returns its loss."""
    S = 2 * L + 1
    C = logits.shape[2]
    lp = np.empty((T_n, S))  # (T_n, S) log emissions per extended state
    for t in range(T_n):
        x = logits[t, n]
        m = -np.inf
        for c in range(C):
            m = max(m, np.float64(x[c]))
        s = 0.0
        for c in range(C):
            s += math.exp(np.float64(x[c]) - m)
        lse = m + math.log(s)
        row = grad[t, n]
        for c in range(C):
            row[c] = w * math.exp(np.float64(x[c]) - lse)
        for s_ in range(S):
            lp[t, s_] = np.float64(x[blank if s_ % 2 == 0 else tg[s_ // 2]]) - lse
    la = np.full((T_n, S), -np.inf)  # (T_n, S)
    lb = np.full((T_n, S), -np.inf)  # (T_n, S), excluding the emission at t
    la[0, 0] = lp[0, 0]
    if S > 1:
        la[0, 1] = lp[0, 1]
    for t in range(1, T_n):
        for s_ in range(S):
            v = la[t - 1, s_]
            if s_ >= 1:
                v = np.logaddexp(v, la[t - 1, s_ - 1])
            if s_ >= 3 and s_ % 2 == 1 and tg[s_ // 2] != tg[s_ // 2 - 1]:
                v = np.logaddexp(v, la[t - 1, s_ - 2])
            la[t, s_] = v + lp[t, s_]
    lb[T_n - 1, S - 1] = 0.0
    if S > 1:
        lb[T_n - 1, S - 2] = 0.0
    for t in range(T_n - 2, -1, -1):
        for s_ in range(S):
            v = lb[t + 1, s_] + lp[t + 1, s_]
            if s_ + 1 < S:
                v = np.logaddexp(v, lb[t + 1, s_ + 1] + lp[t + 1, s_ + 1])
            if s_ + 2 < S and s_ % 2 == 1 and tg[s_ // 2 + 1] != tg[s_ // 2]:
                v = np.logaddexp(v, lb[t + 1, s_ + 2] + lp[t + 1, s_ + 2])
            lb[t, s_] = v
    log_z = la[T_n - 1, S - 1]
    if S > 1:
        log_z = np.logaddexp(log_z, la[T_n - 1, S - 2])
    if not np.isfinite(log_z):
        for t in range(T_n):
            grad[t, n, :] = 0.0
        return np.inf
    post = np.empty(S)  # (S,) one frame's state posterior, normalised to sum to 1 exactly:
    for t in range(T_n):  # exp(la + lb - log_z) alone drifts ~1e-9 off 1 on long, peaked inputs
        m = -np.inf
        for s_ in range(S):
            post[s_] = la[t, s_] + lb[t, s_]
            m = max(m, post[s_])
        total = 0.0
        for s_ in range(S):
            post[s_] = math.exp(post[s_] - m)
            total += post[s_]
        row = grad[t, n]
        for s_ in range(S):
            row[blank if s_ % 2 == 0 else tg[s_ // 2]] -= w * post[s_] / total
    return -log_z


@njit(cache=True, error_model="numpy", nogil=True)
def rows_finite(grad, n, T_n) -> bool:
    """Whether sample ``n``'s gradient rows ``grad[:T_n, n]`` hold only finite numbers."""
    for t in range(T_n):
        row = grad[t, n]
        for c in range(row.shape[0]):
            if not np.isfinite(row[c]):
                return False
    return True


@njit(parallel=True, **JIT)
def ctc_batch(logits, targets, input_lengths, target_lengths, blank, weights, loss, grad,
              log_space):
    """Fill ``loss (N,)``, ``grad (T, N, C)`` (every element written) and ``log_space (N,)``
    (True where the sample took the log-space path) for ``logits (T, N, C)`` float32/64,
    ``targets (N, L)`` int64, lengths ``(N,)`` int64, ``weights (N,)`` float64."""
    T, N, C = logits.shape
    for n in prange(N):
        T_n, L = input_lengths[n], target_lengths[n]
        tg = targets[n]
        w = weights[n]
        repeats = 0
        for j in range(1, L):
            if tg[j] == tg[j - 1]:
                repeats += 1
        log_space[n] = False
        if T_n == 0 or T_n < L + repeats:  # no frames, or too few: only an empty target fits
            loss[n] = 0.0 if L == 0 else np.inf
            for t in range(T):
                grad[t, n, :] = 0.0
            continue
        skip = np.zeros(L + 1)  # (L + 1,) 1.0 where label j may follow label j - 1 directly
        for j in range(1, L):
            if tg[j] != tg[j - 1]:
                skip[j] = 1.0
        value = sample_fast(logits, grad, n, tg, T_n, L, blank, w, skip)
        if not np.isnan(value) and not rows_finite(grad, n, T_n):
            value = np.nan  # a scaled quantity overflowed at an extreme logit scale
        if np.isnan(value):
            value = sample_log_space(logits, grad, n, tg, T_n, L, blank, w)
            log_space[n] = True
        loss[n] = value
        for t in range(T_n, T):  # padded frames: zero, never read
            grad[t, n, :] = 0.0
