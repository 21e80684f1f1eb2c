"""The paths of backend ``numba`` for samples the fast path turns down (float64): the tilted
probability-space rescue (:func:`sample_tilted`) and the log-space forward-backward
(:func:`sample_log_space`). Called by :mod:`ctcbench.backends.numba_kernels`; design and
measurements in docs/numba.md (items 4 and 7).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ctcbench.backends.numba_math import LOG_JIT, exp_nonpositive, lse3
from ctcbench.backends.numba_rows import (JIT, SAFE_FLOOR, SCALE_FLUSH, WORKSPACE_GAP,
                                          gather_emissions, gradient_frame, overlap_is_safe,
                                          row_max, row_sum, segment_frames, softmax_frame)

# -- the tilted rescue: probability space for samples the fast path's guards turned down ----
TILT_PERIOD = 16  # frames between two adjustments of the tilt
TILT_PAIRS = 4  # the slope is read over this many (blank, label) pairs either side
TILT_STEP_MAX = 1.0  # most the tilt changes at one adjustment (per state), and at most
TILT_RANGE = 300.0  # this divided by S, so that exp(delta * (s - centre)) stays finite
TILT_MAX = 40.0  # |tilt| at most this: exp(-2 * tilt) stays a normal float64


@njit(**JIT)
def tilt_factors(F, delta, centre, L):
    """``F (2L + 3,)``: ``exp(-delta (s - centre))`` at each state ``s`` in the row layout
    (blank ``j`` at ``[j]`` is ``s = 2j``, label ``j`` at ``[L + 2 + j]`` is ``s = 2j + 1``),
    0 at the two pads."""
    for j in range(L + 1):
        F[j] = math.exp(-delta * (2 * j - centre))
    F[L + 1] = 0.0
    for j in range(L):
        F[L + 2 + j] = math.exp(-delta * (2 * j + 1 - centre))
    F[2 * L + 2] = 0.0


@njit(**JIT)
def forward_row_tilted(p, a, e, k, skip, L, q, q2):
    """:func:`forward_row_split` with an entry from one state back weighted ``q`` and from two
    states back ``q2 = q**2``: the recursion of ``alpha(s) exp(-tilt s)``, ``q = exp(-tilt)``."""
    eb = e[0] * k
    pb = p[:L + 1]
    pl = p[L + 1:2 * L + 2]
    pc = p[L + 2:2 * L + 2]
    el = e[1:L + 1]
    ab = a[:L + 1]
    al = a[L + 2:2 * L + 2]
    sb = 0.0
    sl = 0.0
    for j in range(L + 1):
        v = eb * (pb[j] + q * pl[j])
        ab[j] = v
        sb += v
    for j in range(L):
        v = el[j] * k * (pc[j] + q * pb[j] + q2 * (skip[j] * pl[j]))
        al[j] = v
        sl += v
    a[L + 1] = 0.0
    a[2 * L + 2] = 0.0
    return sb + sl


@njit(**JIT)
def backward_row_tilted(nb, cb, e1, kb, skip, a, P, L, q, q2):
    """:func:`backward_row_split` of ``beta(s) exp(tilt s)``: a step one state on weighted
    ``q``, two states on ``q2`` (see :func:`forward_row_tilted`)."""
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
    db = 0.0
    zb = 0.0
    for j in range(L + 1):
        v = nbb[j] * eb + q * (nbl[j] * el[j]) * kb
        cbb[j] = v
        db += v
        zb += ab[j] * v
    dl = 0.0
    zl = 0.0
    for j in range(L):
        v = (nbl[j] * el[j] + q2 * (sk1[j] * (nbl1[j] * el1[j]))) * kb + q * (nbb1[j] * eb)
        cbl[j] = v
        dl += v
        r = al[j] * v
        P[j] = r
        zl += r
    return db + dl, zb, zl


@njit(**JIT)
def tilt_step(a, t, T_n, L, S):
    """How much to add to the tilt at frame ``t`` (a multiple of ``TILT_PERIOD``), and the
    centre state of the factors, from the (tilted) forward row ``a``: the slope of its log
    per state around the state a linear alignment would be in at ``t``, so that the tilted
    row is flat there. Capped at ``TILT_STEP_MAX`` and ``TILT_RANGE / S``; a side that
    underflowed to 0 counts as the cap."""
    j_lin = (L * t + (T_n - 1) // 2) // (T_n - 1)  # pair index, rounded
    lo = max(0, j_lin - TILT_PAIRS)
    hi = min(L, j_lin + TILT_PAIRS)
    cap = min(TILT_STEP_MAX, TILT_RANGE / S)
    if hi <= lo:
        return 0.0, 2.0 * j_lin
    m_lo = a[lo] + (a[L + 2 + lo] if lo < L else 0.0)
    m_hi = a[hi] + (a[L + 2 + hi] if hi < L else 0.0)
    if m_lo > 0.0 and m_hi > 0.0:
        delta = (math.log(m_hi) - math.log(m_lo)) / (2.0 * (hi - lo))
    elif m_hi > 0.0:
        delta = cap
    elif m_lo > 0.0:
        delta = -cap
    else:
        delta = 0.0
    delta = min(max(delta, -cap), cap)
    return delta, 2.0 * j_lin


@njit(**JIT)
def sample_tilted(logits, grad, n, tg, T_n, L, blank, w, skip):
    """The rescue: :func:`sample_fast`'s recursion on ``alpha_t(s) exp(-tilt_t s)`` and
    ``beta_t(s) exp(tilt_t s)``, whose products are still ``alpha * beta``; returns the loss,
    or NaN when its guards (the fast path's) fail too. Random or uniform logits at T in the
    thousands put the normalised forward rows' mass far ahead of the states the posterior
    lies in, and the backward rows' far behind, until their overlap underflows; every
    ``TILT_PERIOD`` frames the tilt is changed by the slope of the log forward row around the
    linear alignment's state (:func:`tilt_step`), which flattens both there. The change is a
    factor per state applied to the forward row at that frame and, in the backward pass, to
    the next frame's beta row at the same frame; the tilt's weights ``exp(-tilt)`` and
    ``exp(-2 tilt)`` enter the transitions (:func:`forward_row_tilted`). Checkpointed like
    :func:`sample_fast` (the segment rows are recomputed with the same factors)."""
    if L == 0:  # one state: nothing to tilt
        return np.nan
    S = 2 * L + 1
    W = 2 * L + 3
    K = segment_frames(T_n, L)
    n_seg = -(-T_n // K)
    n_per = -(-T_n // TILT_PERIOD)
    G = WORKSPACE_GAP
    o_first = K * W + G
    o_cs = o_first + n_seg * W + G
    o_tilt = o_cs + T_n + G
    o_dl = o_tilt + n_per + G
    o_ct = o_dl + n_per + G
    o_e = o_ct + n_per + G
    o_e1 = o_e + L + 2 + G
    o_nb = o_e1 + L + 2 + G
    o_cb = o_nb + W + G
    o_F = o_cb + W + G
    o_P = o_F + W + G
    o_skip = o_P + L + G
    ws = np.empty(o_skip + L + 1 + G)  # one workspace, as in sample_fast
    A = ws[:K * W].reshape((K, W))  # (K, W) one segment's tilted forward rows
    first = ws[o_first:o_first + n_seg * W].reshape((n_seg, W))  # (n_seg, W)
    cs = ws[o_cs:o_cs + T_n]  # (T_n,) forward row sums (after the factors)
    tilt = ws[o_tilt:o_tilt + n_per]  # (n_per,) the tilt in each period of frames
    dl = ws[o_dl:o_dl + n_per]  # (n_per,) the change at the period's first frame
    ct = ws[o_ct:o_ct + n_per]  # (n_per,) and the centre state of its factors
    e = ws[o_e:o_e + L + 2]
    e1 = ws[o_e1:o_e1 + L + 2]
    nb = ws[o_nb:o_nb + W]
    cb = ws[o_cb:o_cb + W]
    F = ws[o_F:o_F + W]  # (W,) the factors of one change (tilt_factors)
    P = ws[o_P:o_P + L]
    sk = ws[o_skip:o_skip + L + 1]
    for j in range(L + 1):
        sk[j] = skip[j]
    skip = sk
    log_scale = 0.0
    scale = 1.0
    mu = 0.0  # the tilted rows are alpha exp(-tilt s + mu) / (row sums): mu sums delta * centre
    if not softmax_frame(logits[0, n], grad[0, n], tg, L, blank, e):
        return np.nan
    for i in range(W):
        A[0, i] = 0.0
    A[0, 0] = e[0]
    A[0, L + 2] = e[1]
    c_prev = A[0, 0] + A[0, L + 2]
    cs[0] = c_prev
    if c_prev < SAFE_FLOOR:
        return np.nan
    first[0] = A[0]
    tilt[0] = 0.0
    dl[0] = 0.0
    ct[0] = 0.0
    lam = 0.0
    i = 0
    for t in range(1, T_n):
        prev = i
        i = i + 1 if i + 1 < K else 0
        if not softmax_frame(logits[t, n], grad[t, n], tg, L, blank, e):
            return np.nan
        scale *= c_prev
        if not SCALE_FLUSH <= scale <= 1.0 / SCALE_FLUSH:
            log_scale += math.log(scale)
            scale = 1.0
        q = math.exp(-lam)
        s = forward_row_tilted(A[prev], A[i], e, 1.0 / c_prev, skip, L, q, q * q)
        if t % TILT_PERIOD == 0:
            p = t // TILT_PERIOD
            delta, centre = tilt_step(A[i], t, T_n, L, S)
            delta = min(max(lam + delta, -TILT_MAX), TILT_MAX) - lam
            dl[p] = delta
            ct[p] = centre
            if delta != 0.0:
                tilt_factors(F, delta, centre, L)
                a = A[i]
                for c in range(W):
                    a[c] *= F[c]
                s = row_sum(a, 0, W)
                lam += delta
                mu += delta * centre
            tilt[p] = lam
        if not (s >= SAFE_FLOOR and s < np.inf):
            return np.nan
        if i == 0:
            first[t // K] = A[0]
        c_prev = s
        cs[t] = s
    last = A[i]
    # Z = (row sums) * sum over the two final states of alpha' exp(lam s - mu): blank L is
    # s = 2L, label L - 1 is s = 2L - 1
    el = math.exp(lam)
    final = last[2 * L + 1] + last[L] * el
    if not (final > 0.0 and final < np.inf):
        return np.nan
    loss = -(log_scale + math.log(scale) + math.log(final) + lam * (2 * L - 1) - mu)

    for i in range(W):
        nb[i] = 0.0
        cb[i] = 0.0
    t = T_n - 1
    cb[L] = el  # beta' = exp(lam s - mu) at the final states, up to a constant
    cb[2 * L + 1] = 1.0
    zb = last[L] * el
    zl = last[2 * L + 1]
    d = el + 1.0
    if not overlap_is_safe(zb + zl, cs[t], d):
        return np.nan
    zinv = w / (zb + zl)
    row = grad[t, n]
    gather_emissions(row, tg, L, blank, e)
    gradient_frame(row, blank, w, zb, zinv)
    row[tg[L - 1]] -= zl * zinv
    for seg in range(n_seg - 1, -1, -1):
        t0 = seg * K
        if seg < n_seg - 1:  # recompute this segment's rows, factors included
            A[0] = first[seg]
            for i in range(1, K):
                tau = t0 + i
                gather_emissions(grad[tau, n], tg, L, blank, e1)
                q = math.exp(-tilt[(tau - 1) // TILT_PERIOD])
                forward_row_tilted(A[i - 1], A[i], e1, 1.0 / cs[tau - 1], skip, L, q, q * q)
                if tau % TILT_PERIOD == 0 and dl[tau // TILT_PERIOD] != 0.0:
                    tilt_factors(F, dl[tau // TILT_PERIOD], ct[tau // TILT_PERIOD], L)
                    a = A[i]
                    for c in range(W):
                        a[c] *= F[c]
        for t in range(min(t0 + K, T_n - 1) - 1, t0 - 1, -1):
            nb, cb = cb, nb
            e, e1 = e1, e
            row = grad[t, n]
            gather_emissions(row, tg, L, blank, e)
            if (t + 1) % TILT_PERIOD == 0 and dl[(t + 1) // TILT_PERIOD] != 0.0:
                # frame t + 1 began a period: its beta' to the tilt before it
                tilt_factors(F, dl[(t + 1) // TILT_PERIOD], ct[(t + 1) // TILT_PERIOD], L)
                for c in range(W):
                    nb[c] *= F[c]
            q = math.exp(-tilt[t // TILT_PERIOD])
            d, zb, zl = backward_row_tilted(nb, cb, e1, 1.0 / d, skip, A[t - t0], P, L, q,
                                            q * q)
            z = zb + zl
            if not (d >= SAFE_FLOOR and d < np.inf and overlap_is_safe(z, cs[t], d)):
                return np.nan
            zinv = w / z
            gradient_frame(row, blank, w, zb, zinv)
            for j in range(L):
                row[tg[j]] -= P[j] * zinv
    return loss


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
def sample_log_space(logits, grad, n, tg, T_n, L, blank, w):
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
        row = grad[t, n]
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
            grad[t, n, :] = 0.0
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
            row = grad[t, n]
            for s in range(S):
                row[lab[s]] -= post[s] * scale
            log_emissions(logits[t, n], lse[t], lab, lp)
            for s in range(S):
                nb[s] = cb[s] + lp[s]
    return -log_z
