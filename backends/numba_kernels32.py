"""The opt-in float32 compute of backend ``numba`` (``NumbaBackend(compute_dtype="float32")``).

The fast path of :mod:`ctcbench.backends.numba_kernels` with float32 rows: the softmax is
computed in float64 (the vectorised ``exp``) and stored in a float32 gradient row, the
emissions are gathered from it, and the scaled forward and backward recursions, their sums and
the gradient are float32 (16 lanes of an AVX-512 vector instead of 8); the loss is summed in
float64 from the float32 row sums. A sample whose float32 quantities fall below
``SAFE_FLOOR32``, or whose forward table would not fit ``WHOLE_TABLE_BYTES`` (the float32 path
keeps it whole, no checkpoints), is computed by the float64 paths instead (fast, tilted rescue,
log space), into the same float32 gradient; ``path`` says which. Never the default: the
adapter uses it only when asked.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ctcbench.backends.numba_kernels import (FAST, JIT, LOG_SPACE, SCALE_FLUSH, TILT_PERIOD,
                                             TILT_STEP_MAX, TILTED, WHOLE_TABLE_BYTES,
                                             WORKSPACE_GAP, gather_emissions, row_max, row_sum,
                                             sample_fast, sample_log_space, sample_tilted,
                                             tilt_step)
from ctcbench.backends.numba_math import exp_nonpositive

FAST64 = 3  # the path of a sample the float32 paths turned down: the float64 fast path
TILTED32 = 4  # the float32 tilted rescue
# float32's smallest normal is 1.2e-38; below this a scaled float32 quantity may have lost mass
SAFE_FLOOR32 = np.float32(1e-30)
F32 = np.float32


@njit(**JIT)
def softmax_frame32(x, row, tg, L, blank, e):
    """:func:`~ctcbench.backends.numba_kernels.softmax_frame` into a float32 ``row`` and
    float32 emissions ``e``: ``exp`` in float64, rounded once when stored."""
    C = x.shape[0]
    m = row_max(x)
    for c in range(C):
        row[c] = exp_nonpositive(np.float64(x[c]) - m)
    s = 0.0
    for c in range(C):  # read-only, in float64
        s += np.float64(row[c])
    inv = F32(1.0 / s)
    for c in range(C):
        row[c] *= inv
    gather_emissions(row, tg, L, blank, e)
    return s < np.inf


@njit(**JIT)
def forward_row32(p, a, e, k, skip, L):
    """:func:`~ctcbench.backends.numba_kernels.forward_row_split` in float32 (``k`` float32)."""
    eb = e[0] * k
    pb = p[:L + 1]
    pl = p[L + 1:2 * L + 2]
    pc = p[L + 2:2 * L + 2]
    el = e[1:L + 1]
    ab = a[:L + 1]
    al = a[L + 2:2 * L + 2]
    sb = F32(0.0)
    for j in range(L + 1):
        v = eb * (pb[j] + pl[j])
        ab[j] = v
        sb += v
    sl = F32(0.0)
    for j in range(L):
        v = el[j] * k * (pc[j] + pb[j] + skip[j] * pl[j])
        al[j] = v
        sl += v
    a[L + 1] = 0.0
    a[2 * L + 2] = 0.0
    return sb + sl


@njit(**JIT)
def backward_row32(nb, cb, e1, kb, skip, a, P, L):
    """:func:`~ctcbench.backends.numba_kernels.backward_row_split` in float32."""
    eb = e1[0] * kb
    nbb = nb[:L + 1]
    nbb1 = nb[1:L + 1]
    nbl = nb[L + 2:2 * L + 3]
    nbl1 = nb[L + 3:2 * L + 3]
    el = e1[1:L + 2]
    el1 = e1[2:L + 2]
    sk1 = skip[1:L + 1]
    cbb = cb[:L + 1]
    cbl = cb[L + 2:2 * L + 2]
    ab = a[:L + 1]
    al = a[L + 2:2 * L + 2]
    db = F32(0.0)
    zb = F32(0.0)
    for j in range(L + 1):
        v = nbb[j] * eb + nbl[j] * el[j] * kb
        cbb[j] = v
        db += v
        zb += ab[j] * v
    dl = F32(0.0)
    zl = F32(0.0)
    for j in range(L):
        v = (nbl[j] * el[j] + sk1[j] * (nbl1[j] * el1[j])) * kb + nbb1[j] * eb
        cbl[j] = v
        dl += v
        q = al[j] * v
        P[j] = q
        zl += q
    return db + dl, zb, zl


@njit(**JIT)
def overlap_is_safe32(z, c, d):
    """:func:`~ctcbench.backends.numba_kernels.overlap_is_safe` at ``SAFE_FLOOR32``."""
    return z >= SAFE_FLOOR32 and z / c / d >= SAFE_FLOOR32


@njit(**JIT)
def sample_fast32(logits, grad, n, tg, T_n, L, blank, w, skip):
    """:func:`~ctcbench.backends.numba_kernels.sample_fast` in float32, the whole forward
    table kept (NaN, nothing computed, when it would not fit ``WHOLE_TABLE_BYTES``); returns
    the loss (float64) or NaN when a guard fails."""
    W = 2 * L + 3
    if 4 * T_n * W > WHOLE_TABLE_BYTES:
        return np.nan
    G = WORKSPACE_GAP
    o_cs = T_n * W + G
    o_e = o_cs + T_n + G
    o_e1 = o_e + L + 2 + G
    o_nb = o_e1 + L + 2 + G
    o_cb = o_nb + W + G
    o_P = o_cb + W + G
    o_skip = o_P + L + G
    ws = np.empty(o_skip + L + 1 + G, dtype=np.float32)  # one workspace, as in sample_fast
    A = ws[:T_n * W].reshape((T_n, W))  # (T_n, W) the forward rows
    cs = ws[o_cs:o_cs + T_n]  # (T_n,) forward row sums
    e = ws[o_e:o_e + L + 2]
    e1 = ws[o_e1:o_e1 + L + 2]
    nb = ws[o_nb:o_nb + W]
    cb = ws[o_cb:o_cb + W]
    P = ws[o_P:o_P + L]
    sk = ws[o_skip:o_skip + L + 1]
    for j in range(L + 1):
        sk[j] = skip[j]
    skip = sk
    wf = F32(w)
    log_scale = 0.0
    scale = 1.0
    if not softmax_frame32(logits[0, n], grad[0, n], tg, L, blank, e):
        return np.nan
    for i in range(W):
        A[0, i] = 0.0
    A[0, 0] = e[0]
    if L > 0:
        A[0, L + 2] = e[1]
    c_prev = A[0, 0] + (A[0, L + 2] if L > 0 else F32(0.0))
    cs[0] = c_prev
    if c_prev < SAFE_FLOOR32:
        return np.nan
    for t in range(1, T_n):
        if not softmax_frame32(logits[t, n], grad[t, n], tg, L, blank, e):
            return np.nan
        scale *= np.float64(c_prev)
        if not SCALE_FLUSH <= scale <= 1.0 / SCALE_FLUSH:
            log_scale += math.log(scale)
            scale = 1.0
        s = forward_row32(A[t - 1], A[t], e, F32(1.0) / c_prev, skip, L)
        if not (s >= SAFE_FLOOR32 and s < np.inf):
            return np.nan
        c_prev = s
        cs[t] = s
    last = A[T_n - 1]
    final = np.float64(last[L]) + (np.float64(last[2 * L + 1]) if L > 0 else 0.0)
    if not final > 0.0:
        return np.nan
    loss = -(log_scale + math.log(scale) + math.log(final))

    for i in range(W):
        nb[i] = 0.0
        cb[i] = 0.0
    t = T_n - 1
    cb[L] = 1.0
    zb = last[L]
    zl = F32(0.0)
    if L > 0:
        cb[2 * L + 1] = 1.0
        zl = last[2 * L + 1]
    d = F32(2.0) if L > 0 else F32(1.0)
    if not overlap_is_safe32(zb + zl, cs[t], d):
        return np.nan
    zinv = wf / (zb + zl)
    row = grad[t, n]
    gather_emissions(row, tg, L, blank, e)
    if w != 1.0:
        for c in range(row.shape[0]):
            row[c] *= wf
    row[blank] -= zb * zinv
    if L > 0:
        row[tg[L - 1]] -= zl * zinv
    for t in range(T_n - 2, -1, -1):
        nb, cb = cb, nb
        e, e1 = e1, e
        row = grad[t, n]
        gather_emissions(row, tg, L, blank, e)
        d, zb, zl = backward_row32(nb, cb, e1, F32(1.0) / d, skip, A[t], P, L)
        z = zb + zl
        if not (d >= SAFE_FLOOR32 and d < np.inf and overlap_is_safe32(z, cs[t], d)):
            return np.nan
        zinv = wf / z
        if w != 1.0:
            for c in range(row.shape[0]):
                row[c] *= wf
        row[blank] -= zb * zinv
        for j in range(L):
            row[tg[j]] -= P[j] * zinv
    return loss


@njit(parallel=True, **JIT)
def ctc_batch32(logits, targets, input_lengths, target_lengths, blank, weights, loss, grad,
                path):
    """:func:`~ctcbench.backends.numba_kernels.ctc_batch` with a float32 ``grad (T, N, C)``
    and the float32 paths first; ``path (N,)`` int8: ``FAST`` or ``TILTED32`` (float32), else
    ``FAST64``, ``TILTED`` or ``LOG_SPACE`` (float64 recursions, the gradient stored in
    float32)."""
    T, N, C = logits.shape
    for n in prange(N):
        T_n, L = input_lengths[n], target_lengths[n]
        tg = targets[n]
        w = weights[n]
        repeats = 0
        for j in range(1, L):
            if tg[j] == tg[j - 1]:
                repeats += 1
        path[n] = FAST
        if T_n == 0 or T_n < L + repeats:
            loss[n] = 0.0 if L == 0 else np.inf
            for t in range(T):
                grad[t, n, :] = 0.0
            continue
        skip = np.zeros(L + 1)
        for j in range(1, L):
            if tg[j] != tg[j - 1]:
                skip[j] = 1.0
        value = sample_fast32(logits, grad, n, tg, T_n, L, blank, w, skip)
        if np.isnan(value):
            value = sample_tilted32(logits, grad, n, tg, T_n, L, blank, w, skip)
            path[n] = TILTED32
        if np.isnan(value):
            value = sample_fast(logits, grad, n, tg, T_n, L, blank, w, skip)
            path[n] = FAST64
        if np.isnan(value):
            value = sample_tilted(logits, grad, n, tg, T_n, L, blank, w, skip)
            path[n] = TILTED
        if np.isnan(value):
            value = sample_log_space(logits, grad, n, tg, T_n, L, blank, w)
            path[n] = LOG_SPACE
        loss[n] = value
        for t in range(T_n, T):
            grad[t, n, :] = 0.0


# the tilted rescue in float32: the factors and weights must stay well inside float32's range
TILT_RANGE32 = 60.0  # exp(delta * (s - centre)) <= e^60 (float32 holds e^88)
TILT_MAX32 = 12.0  # exp(-2 * tilt) >= e^-24


@njit(**JIT)
def forward_row_tilted32(p, a, e, k, skip, L, q, q2):
    """:func:`~ctcbench.backends.numba_kernels.forward_row_tilted` in float32."""
    eb = e[0] * k
    pb = p[:L + 1]
    pl = p[L + 1:2 * L + 2]
    pc = p[L + 2:2 * L + 2]
    el = e[1:L + 1]
    ab = a[:L + 1]
    al = a[L + 2:2 * L + 2]
    sb = F32(0.0)
    for j in range(L + 1):
        v = eb * (pb[j] + q * pl[j])
        ab[j] = v
        sb += v
    sl = F32(0.0)
    for j in range(L):
        v = el[j] * k * (pc[j] + q * pb[j] + q2 * (skip[j] * pl[j]))
        al[j] = v
        sl += v
    a[L + 1] = 0.0
    a[2 * L + 2] = 0.0
    return sb + sl


@njit(**JIT)
def backward_row_tilted32(nb, cb, e1, kb, skip, a, P, L, q, q2):
    """:func:`~ctcbench.backends.numba_kernels.backward_row_tilted` in float32."""
    eb = e1[0] * kb
    nbb = nb[:L + 1]
    nbb1 = nb[1:L + 1]
    nbl = nb[L + 2:2 * L + 3]
    nbl1 = nb[L + 3:2 * L + 3]
    el = e1[1:L + 2]
    el1 = e1[2:L + 2]
    sk1 = skip[1:L + 1]
    cbb = cb[:L + 1]
    cbl = cb[L + 2:2 * L + 2]
    ab = a[:L + 1]
    al = a[L + 2:2 * L + 2]
    db = F32(0.0)
    zb = F32(0.0)
    for j in range(L + 1):
        v = nbb[j] * eb + q * (nbl[j] * el[j]) * kb
        cbb[j] = v
        db += v
        zb += ab[j] * v
    dl = F32(0.0)
    zl = F32(0.0)
    for j in range(L):
        v = (nbl[j] * el[j] + q2 * (sk1[j] * (nbl1[j] * el1[j]))) * kb + q * (nbb1[j] * eb)
        cbl[j] = v
        dl += v
        r = al[j] * v
        P[j] = r
        zl += r
    return db + dl, zb, zl


@njit(**JIT)
def tilt_factors32(F, delta, centre, L):
    """:func:`~ctcbench.backends.numba_kernels.tilt_factors` into a float32 ``F``."""
    for j in range(L + 1):
        F[j] = math.exp(-delta * (2 * j - centre))
    F[L + 1] = 0.0
    for j in range(L):
        F[L + 2 + j] = math.exp(-delta * (2 * j + 1 - centre))
    F[2 * L + 2] = 0.0


@njit(**JIT)
def sample_tilted32(logits, grad, n, tg, T_n, L, blank, w, skip):
    """:func:`~ctcbench.backends.numba_kernels.sample_tilted` in float32, the whole forward
    table kept (NaN, nothing computed, when it would not fit ``WHOLE_TABLE_BYTES``): the
    normalised rows of random logits at T in the hundreds already stop overlapping within
    float32's range, so the float32 compute tilts from the start when the untilted attempt
    fails."""
    W = 2 * L + 3
    if L == 0 or 4 * T_n * W > WHOLE_TABLE_BYTES:
        return np.nan
    S = 2 * L + 1
    n_per = -(-T_n // TILT_PERIOD)
    G = WORKSPACE_GAP
    o_cs = T_n * W + G
    o_e = o_cs + T_n + G
    o_e1 = o_e + L + 2 + G
    o_nb = o_e1 + L + 2 + G
    o_cb = o_nb + W + G
    o_F = o_cb + W + G
    o_P = o_F + W + G
    o_skip = o_P + L + G
    ws = np.empty(o_skip + L + 1 + G, dtype=np.float32)
    A = ws[:T_n * W].reshape((T_n, W))
    cs = ws[o_cs:o_cs + T_n]
    e = ws[o_e:o_e + L + 2]
    e1 = ws[o_e1:o_e1 + L + 2]
    nb = ws[o_nb:o_nb + W]
    cb = ws[o_cb:o_cb + W]
    F = ws[o_F:o_F + W]
    P = ws[o_P:o_P + L]
    sk = ws[o_skip:o_skip + L + 1]
    for j in range(L + 1):
        sk[j] = skip[j]
    skip = sk
    tl = np.empty((3, n_per))  # float64: tilt, change and centre of each period
    tilt = tl[0]
    dl = tl[1]
    ct = tl[2]
    wf = F32(w)
    log_scale = 0.0
    scale = 1.0
    mu = 0.0
    if not softmax_frame32(logits[0, n], grad[0, n], tg, L, blank, e):
        return np.nan
    for i in range(W):
        A[0, i] = 0.0
    A[0, 0] = e[0]
    A[0, L + 2] = e[1]
    c_prev = A[0, 0] + A[0, L + 2]
    cs[0] = c_prev
    if c_prev < SAFE_FLOOR32:
        return np.nan
    tilt[0] = 0.0
    dl[0] = 0.0
    ct[0] = 0.0
    lam = 0.0
    cap = min(TILT_STEP_MAX, TILT_RANGE32 / S)
    for t in range(1, T_n):
        if not softmax_frame32(logits[t, n], grad[t, n], tg, L, blank, e):
            return np.nan
        scale *= np.float64(c_prev)
        if not SCALE_FLUSH <= scale <= 1.0 / SCALE_FLUSH:
            log_scale += math.log(scale)
            scale = 1.0
        q = F32(math.exp(-lam))
        s = forward_row_tilted32(A[t - 1], A[t], e, F32(1.0) / c_prev, skip, L, q, q * q)
        if t % TILT_PERIOD == 0:
            p = t // TILT_PERIOD
            delta, centre = tilt_step(A[t], t, T_n, L, S)
            delta = min(max(delta, -cap), cap)
            delta = min(max(lam + delta, -TILT_MAX32), TILT_MAX32) - lam
            dl[p] = delta
            ct[p] = centre
            if delta != 0.0:
                tilt_factors32(F, delta, centre, L)
                a = A[t]
                for c in range(W):
                    a[c] *= F[c]
                s = F32(row_sum(a, 0, W))
                lam += delta
                mu += delta * centre
            tilt[p] = lam
        if not (s >= SAFE_FLOOR32 and s < np.inf):
            return np.nan
        c_prev = s
        cs[t] = s
    last = A[T_n - 1]
    el = math.exp(lam)
    final = np.float64(last[2 * L + 1]) + np.float64(last[L]) * el
    if not (final > 0.0 and final < np.inf):
        return np.nan
    loss = -(log_scale + math.log(scale) + math.log(final) + lam * (2 * L - 1) - mu)

    for i in range(W):
        nb[i] = 0.0
        cb[i] = 0.0
    t = T_n - 1
    cb[L] = el
    cb[2 * L + 1] = 1.0
    zb = last[L] * F32(el)
    zl = last[2 * L + 1]
    d = F32(el) + F32(1.0)
    if not overlap_is_safe32(zb + zl, cs[t], d):
        return np.nan
    zinv = wf / (zb + zl)
    row = grad[t, n]
    gather_emissions(row, tg, L, blank, e)
    if w != 1.0:
        for c in range(row.shape[0]):
            row[c] *= wf
    row[blank] -= zb * zinv
    row[tg[L - 1]] -= zl * zinv
    for t in range(T_n - 2, -1, -1):
        nb, cb = cb, nb
        e, e1 = e1, e
        row = grad[t, n]
        gather_emissions(row, tg, L, blank, e)
        if (t + 1) % TILT_PERIOD == 0 and dl[(t + 1) // TILT_PERIOD] != 0.0:
            tilt_factors32(F, dl[(t + 1) // TILT_PERIOD], ct[(t + 1) // TILT_PERIOD], L)
            for c in range(W):
                nb[c] *= F[c]
        q = F32(math.exp(-tilt[t // TILT_PERIOD]))
        d, zb, zl = backward_row_tilted32(nb, cb, e1, F32(1.0) / d, skip, A[t], P, L, q,
                                          q * q)
        z = zb + zl
        if not (d >= SAFE_FLOOR32 and d < np.inf and overlap_is_safe32(z, cs[t], d)):
            return np.nan
        zinv = wf / z
        if w != 1.0:
            for c in range(row.shape[0]):
                row[c] *= wf
        row[blank] -= zb * zinv
        for j in range(L):
            row[tg[j]] -= P[j] * zinv
    return loss
