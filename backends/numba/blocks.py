"""The blocked rescue of backend ``numba`` (float64): :func:`sample_blocked`, probability space
for the samples the fast path turns down because one scale per row cannot hold them.

Random logits at T in the thousands spread a forward row over thousands of nats: ``log alpha``
falls by 5-10 nats a state across the row and ``log beta`` rises by 4-7, so the states the
posterior lies in are far below the row's maximum in either pass. Here each block of
``BLOCK_PAIRS`` (blank, label) pairs keeps its own power-of-two scale: the stored row is
``alpha(s) 2^-E_b`` for the states ``s`` of block ``b`` (``beta(s) 2^-F_b`` in the backward pass),
divided by the last row's sum as on the fast path, and renormalised every ``PERIOD`` frames so
that a block's entries sum to ``[1, 2)``. A power of two rounds nothing, so the recursion is
the fast path's, exactly: within a block nothing changes, and the one transition that enters a
block from its neighbour is weighed ``2^(E_b-1 - E_b)``. The posterior of block ``b`` is
weighed ``2^(E_b + F_b - M)`` (``M`` the largest). A stored entry loses at most ``2^-1022`` to
underflow; the guard asks the weighed overlap to be at least ``SAFE_FLOOR`` of the two rows'
sums times the sum of the weights. Design and measurements: docs/numba.md (design item 7).
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from ctcbench.backends.numba.primitives import _bits_to_float, _float_to_bits, prefetch_row
from ctcbench.backends.numba.rows import (JIT, SAFE_FLOOR, SCALE_FLUSH, WORKSPACE_GAP,
                                          backward_views, first_forward_row, forward_views,
                                          gather_emissions_at, gradient_frame, row_sum,
                                          segment_frames, softmax_frame_at)

BLOCK_PAIRS = 8  # (blank, label) pairs a block: 16 states (16 pairs were too many for C=5 at
# T=60000 L=39, where alpha falls by tens of nats a state)
HEADROOM = 900  # what enters a block from its neighbour stays below 2^HEADROOM in its scale
PERIOD = 8  # frames between two renormalisations of the blocks
LN2 = math.log(2.0)


@njit(inline="always", **JIT)
def exponent(x):
    """``k`` with ``2^k <= x < 2^(k+1)``, for a positive normal ``x``."""
    return ((_float_to_bits(x) >> 52) & 0x7FF) - 1023


@njit(inline="always", **JIT)
def pow2(k):
    """``2.0 ** k`` for an integer ``k <= 1023``; 0 below ``-1022`` (no subnormals)."""
    return _bits_to_float((k + 1023) << 52) if k >= -1022 else 0.0


@njit(**JIT)
def forward_row_cross(A, prev, i, e, k, skip, x, L):
    """``rows.forward_row_at`` with label ``j - 1``'s entry into pair ``j`` weighed
    ``x[j]`` (1 within a block, ``2^(E_b-1 - E_b)`` where pair ``j`` starts block ``b``);
    returns the row's sum. Written out again on purpose: ``forward_row`` with an optional
    ``x`` (``None`` pruned on the fast path) gave the same bits but ran 3-5% slower on both
    paths (docs/numba.md, step 19)."""
    a = A[i]
    eb = e[0] * k
    pb, pl, pc, el, ab, al = forward_views(A[prev], a, e, L)
    sb = sl = 0.0
    for j in range(L):
        u = pb[j]
        q = x[j] * pl[j]
        v = eb * (u + q)
        ab[j] = v
        sb += v
        v = el[j] * k * (pc[j] + u + skip[j] * q)
        al[j] = v
        sl += v
    v = eb * (pb[L] + x[L] * pl[L])
    ab[L] = v
    sb += v
    a[L + 1] = 0.0
    a[2 * L + 2] = 0.0
    return sb + sl


@njit(**JIT)
def backward_row_cross(nb, cb, e1, kb, skip, A, i, P, y, wt, L):
    """``rows.backward_row_at`` with what label ``j`` reaches in pair ``j + 1`` weighed
    ``y[j]`` (1 within a block, ``2^(F_b+1 - F_b)`` where pair ``j + 1`` starts block
    ``b + 1``), and each pair's ``alpha * beta`` weighed ``wt[j]``, its block's
    ``2^(E_b + F_b - M)``: returns the row's sum and the weighed sums over the blanks and
    the labels (``P (L,)`` each label's)."""
    eb = e1[0] * kb
    nbb, nbb1, nbl, nbl1, el, el1, sk1, cbb, cbl, ab, al = \
        backward_views(nb, cb, e1, skip, A[i], L)
    db = zb = dl = zl = 0.0
    for j in range(L):
        g = nbl[j] * el[j]
        v = nbb[j] * eb + g * kb
        cbb[j] = v
        db += v
        zb += ab[j] * v * wt[j]
        v = (g + y[j] * (sk1[j] * (nbl1[j] * el1[j]))) * kb + y[j] * (nbb1[j] * eb)
        cbl[j] = v
        dl += v
        q = al[j] * v * wt[j]
        P[j] = q
        zl += q
    v = nbb[L] * eb
    cbb[L] = v
    db += v
    zb += ab[L] * v * wt[L]
    return db + dl, zb, zl


@njit(**JIT)
def block_sums(row, L, sums):
    """``sums (n_blk,)``: each block's entries summed (blanks and labels of its pairs)."""
    B = BLOCK_PAIRS
    for b in range(sums.shape[0]):
        j0 = b * B
        sums[b] = row_sum(row, j0, min(j0 + B, L + 1)) \
            + row_sum(row, L + 2 + j0, L + 2 + min(j0 + B, L))


@njit(**JIT)
def scale_blocks(row, L, E_old, E_new):
    """Each block of ``row`` from scale ``E_old`` to ``E_new``: times ``2^(E_old - E_new)``
    (at most ``2^1023``, which only an empty block would pass)."""
    B = BLOCK_PAIRS
    for b in range(E_new.shape[0]):
        f = pow2(np.int64(min(E_old[b] - E_new[b], 1023.0)))
        j0 = b * B
        for j in range(j0, min(j0 + B, L + 1)):
            row[j] *= f
        for j in range(L + 2 + j0, L + 2 + min(j0 + B, L)):
            row[j] *= f


@njit(**JIT)
def cross_factors(E, x, forward):
    """The weights between blocks (:func:`forward_row_cross`' ``x`` or
    :func:`backward_row_cross`' ``y``) from the block scales ``E``."""
    B = BLOCK_PAIRS
    for b in range(1, E.shape[0]):
        d = E[b - 1] - E[b] if forward else E[b] - E[b - 1]
        x[b * B if forward else b * B - 1] = pow2(np.int64(min(d, 1023.0)))


@njit(**JIT)
def renormalise(row, L, E_old, E_new, sums, sums_before, x, forward):
    """Give each block of ``row`` (scales ``E_old``) the scale ``E_new`` at which its entries
    sum to ``[1, 2)``, or higher where what enters from its neighbour (the block before in
    the forward pass, after in the backward) would pass ``2^HEADROOM`` in it (its own entries
    below ``2^-1022`` of that are lost, which the guard counts); an empty block takes that
    neighbour's scale. ``x``: the weights between blocks (:func:`cross_factors`). False
    when a block that held mass at the last renormalisation (``sums_before``) has none, or
    the weight between two blocks would pass ``2^1023``.
    ``sums``: the blocks' sums, before scaling."""
    n_blk = E_new.shape[0]
    block_sums(row, L, sums)
    for i in range(n_blk):
        b = i if forward else n_blk - 1 - i
        nbr = b - 1 if forward else b + 1
        s = sums[b]
        if s > 0.0:
            e_new = E_old[b] + exponent(s)
            if 0 <= nbr < n_blk and sums[nbr] > 0.0:
                e_new = max(e_new, E_old[nbr] + exponent(sums[nbr]) + 1 - HEADROOM)
            E_new[b] = e_new
        elif sums_before[b] > 0.0 or not s == 0.0:  # lost its mass, or NaN
            return False
        else:
            E_new[b] = E_new[nbr] if 0 <= nbr < n_blk else E_old[b]
    for b in range(n_blk):
        nbr = b - 1 if forward else b + 1
        if 0 <= nbr < n_blk and sums[nbr] > 0.0:
            # a weight above 2^1023 is not a float64; one below 2^-1022 is 0, and what it
            # would carry (the neighbour's entries sum to less than 2 times one period's
            # growth) is an underflow loss of the kind the guard counts
            if E_new[nbr] - E_new[b] > 1023:
                return False
    scale_blocks(row, L, E_old, E_new)
    cross_factors(E_new, x, forward)
    return True


@njit(**JIT)
def posterior_weights(E, F, t, T_n, L, wt):
    """``wt (L + 1,)``: each pair's weight ``2^(E_b + F_b - M)``, ``M`` the largest over the
    blocks both passes can reach in frames ``t`` to ``t + PERIOD - 1`` (alpha: from pair 0 on
    by at most one pair a frame; beta: back from pair ``L``), 0 elsewhere; returns the
    weights' sum over those blocks, the guard's measure of what underflow may have taken."""
    B = BLOCK_PAIRS
    n_blk = E.shape[0]
    t_last = min(t + PERIOD, T_n) - 1
    lo = max(0, L - 1 - (T_n - 1 - t)) // B  # first block beta may hold mass in at frame t
    hi = min(n_blk - 1, t_last // B)  # last block alpha may reach by t_last
    M = -np.inf
    for b in range(lo, hi + 1):
        M = max(M, E[b] + F[b])
    bound = 0.0
    for b in range(n_blk):
        w = pow2(np.int64(E[b] + F[b] - M)) if lo <= b <= hi else 0.0
        bound += w
        for j in range(b * B, min(b * B + B, L + 1)):
            wt[j] = w
    return bound


@njit(**JIT)
def sample_blocked(logits, grad, n, gn, tg, T_n, L, blank, w, skip):
    """The blocked rescue (module docstring): sample ``n``'s loss, its gradient rows written,
    or NaN when a guard fails. ``kernels.sample_fast``'s recursion (rows divided by
    the last row's sum, checkpointed), its blocks renormalised every ``PERIOD`` frames: the
    forward pass at frames ``t % PERIOD == 0``, whose scales are kept for the backward pass,
    which renormalises beta at the first frame of each period it enters."""
    if L == 0:  # one state, one block: the fast path's single scale is this
        return np.nan
    B = BLOCK_PAIRS
    W = 2 * L + 3
    n_blk = L // B + 1  # blocks of pairs 0..L (blank L is pair L)
    n_per = -(-T_n // PERIOD)
    K = segment_frames(T_n, L)
    n_seg = -(-T_n // K)
    G = WORKSPACE_GAP
    o_first = K * W + G
    o_cs = o_first + n_seg * W + G
    o_E = o_cs + T_n + G
    o_e = o_E + n_per * n_blk + G
    o_e1 = o_e + L + 2 + G
    o_nb = o_e1 + L + 2 + G
    o_cb = o_nb + W + G
    o_P = o_cb + W + G
    o_x = o_P + L + G
    o_y = o_x + L + 1 + G
    o_wt = o_y + L + 1 + G
    o_blk = o_wt + L + 1 + G
    o_skip = o_blk + 6 * n_blk + G
    ws = np.empty(o_skip + L + 1 + G)  # one workspace, as in sample_fast
    A = ws[:K * W].reshape((K, W))  # (K, W) one segment's forward rows
    first = ws[o_first:o_first + n_seg * W].reshape((n_seg, W))  # (n_seg, W)
    cs = ws[o_cs:o_cs + T_n]  # (T_n,) forward row sums
    E = ws[o_E:o_E + n_per * n_blk].reshape((n_per, n_blk))  # (n_per, n_blk) block scales
    e = ws[o_e:o_e + L + 2]
    e1 = ws[o_e1:o_e1 + L + 2]
    nb = ws[o_nb:o_nb + W]
    cb = ws[o_cb:o_cb + W]
    P = ws[o_P:o_P + L]
    x = ws[o_x:o_x + L + 1]  # (L + 1,) forward weights between blocks (forward_row_cross)
    y = ws[o_y:o_y + L + 1]  # (L + 1,) backward ones (backward_row_cross)
    wt = ws[o_wt:o_wt + L + 1]  # (L + 1,) each pair's posterior weight
    blk = ws[o_blk:o_blk + 6 * n_blk].reshape((6, n_blk))  # (6, n_blk) per block:
    F, F1, sums, sums_a, sums_b, zero = blk[0], blk[1], blk[2], blk[3], blk[4], blk[5]
    sk = ws[o_skip:o_skip + L + 1]
    for j in range(L + 1):
        sk[j] = skip[j]
        x[j] = 1.0
        y[j] = 1.0
    skip = sk
    for b in range(n_blk):
        zero[b] = 0.0
        sums_b[b] = 0.0
    log_scale = 0.0
    scale = 1.0
    if not softmax_frame_at(logits, grad, 0, n, gn, tg, L, blank, e):
        return np.nan
    first_forward_row(A[0], e, L)
    if not renormalise(A[0], L, zero, E[0], sums_a, zero, x, True):
        return np.nan
    c_prev = row_sum(A[0], 0, W)
    cs[0] = c_prev
    if c_prev < SAFE_FLOOR:
        return np.nan
    first[0] = A[0]
    i = 0
    for t in range(1, T_n):
        prev = i
        i = i + 1 if i + 1 < K else 0
        if t + 1 < T_n:  # the next frame's rows, as in sample_fast
            prefetch_row(logits, t + 1, n)
            prefetch_row(grad, t + 1, gn)
        if not softmax_frame_at(logits, grad, t, n, gn, tg, L, blank, e):
            return np.nan
        scale *= c_prev
        if not SCALE_FLUSH <= scale <= 1.0 / SCALE_FLUSH:
            log_scale += math.log(scale)
            scale = 1.0
        s = forward_row_cross(A, prev, i, e, 1.0 / c_prev, skip, x, L)
        if t % PERIOD == 0:
            p = t // PERIOD
            for b in range(n_blk):
                sums_b[b] = sums_a[b]  # the blocks' sums at the last renormalisation
            if not renormalise(A[i], L, E[p - 1], E[p], sums_a, sums_b, x, True):
                return np.nan
            s = row_sum(A[i], 0, W)
        if not (s >= SAFE_FLOOR and s < np.inf):
            return np.nan
        if i == 0:
            first[t // K] = A[0]
        c_prev = s
        cs[t] = s
    last = A[i]
    Ep = E[(T_n - 1) // PERIOD]
    b_blank, b_label = L // B, (L - 1) // B  # the blocks of blank L and label L - 1
    top = max(Ep[b_blank], Ep[b_label])
    final = last[L] * pow2(np.int64(Ep[b_blank] - top)) \
        + last[2 * L + 1] * pow2(np.int64(Ep[b_label] - top))
    if not (final > 0.0 and final < np.inf):
        return np.nan
    loss = -(log_scale + math.log(scale) + math.log(final) + top * LN2)

    for i in range(W):
        nb[i] = 0.0
        cb[i] = 0.0
    cb[L] = 1.0
    cb[2 * L + 1] = 1.0
    for b in range(n_blk):
        F1[b] = 0.0
        sums_b[b] = 0.0
    d = 2.0
    bound = 1.0
    # Each step swaps the rows first, the last frame's too (undone here): views swapped
    # under a condition kept their reference counts, four atomic pairs a frame.
    nb, cb = cb, nb
    e, e1 = e1, e
    for seg in range(n_seg - 1, -1, -1):
        t0 = seg * K
        if seg < n_seg - 1:  # recompute this segment's rows, block scales replayed
            A[0] = first[seg]
            cross_factors(E[t0 // PERIOD], x, True)
            for r in range(1, K):
                tau = t0 + r
                prefetch_row(grad, tau + 1, gn)  # tau + 1 < T_n: not the last segment
                gather_emissions_at(grad, tau, gn, tg, L, blank, e1)
                forward_row_cross(A, r - 1, r, e1, 1.0 / cs[tau - 1], skip, x, L)
                if tau % PERIOD == 0:
                    p = tau // PERIOD
                    scale_blocks(A[r], L, E[p - 1], E[p])
                    cross_factors(E[p], x, True)
        for t in range(min(t0 + K, T_n) - 1, t0 - 1, -1):
            if t > 0:
                prefetch_row(grad, t - 1, gn)
            nb, cb = cb, nb
            e, e1 = e1, e  # e1: frame t + 1's, gathered by the step before
            gather_emissions_at(grad, t, gn, tg, L, blank, e)  # before the gradient goes in
            ia = t - t0  # the forward row's index in A
            if t < T_n - 1:
                d, zb, zl = backward_row_cross(nb, cb, e1, 1.0 / d, skip, A, ia, P, y, wt, L)
            if t == T_n - 1 or t % PERIOD == PERIOD - 1:  # the first frame of a period
                for b in range(n_blk):
                    sums[b] = sums_b[b]
                if not renormalise(cb, L, F1, F, sums_b, sums, y, False):
                    return np.nan
                for b in range(n_blk):
                    F1[b] = F[b]
                d = row_sum(cb, 0, W)
                bound = posterior_weights(E[t // PERIOD], F, t - t % PERIOD, T_n, L, wt)
                zb = zl = 0.0  # alpha * beta again, with the new scales
                for j in range(L + 1):
                    zb += A[ia, j] * cb[j] * wt[j]
                for j in range(L):
                    v = A[ia, L + 2 + j] * cb[L + 2 + j] * wt[j]
                    P[j] = v
                    zl += v
            z = zb + zl
            if not (d >= SAFE_FLOOR and d < np.inf and z >= SAFE_FLOOR
                    and z / (cs[t] + d) >= SAFE_FLOOR * bound):
                return np.nan
            gradient_frame(grad, t, gn, blank, w, zb, w / z, tg, P, L)
    return loss
