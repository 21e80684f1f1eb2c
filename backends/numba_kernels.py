"""The compiled CTC kernels behind backend ``numba`` (``backends/numba_ctc.py``).

Shape letters as in :mod:`ctcbench.core.problem`; per sample ``T_n`` frames, ``L_n`` labels.
One call of :func:`ctc_batch` does a whole batch: softmax, forward and backward recursions,
loss and gradient w.r.t. the logits, one sample per ``prange`` iteration (a sample is computed
by one thread start to end, so the result does not depend on the thread count).

Fast path (:func:`sample_fast`): probability space, each row divided by the previous row's sum
(Rabiner's scaling, as in :mod:`ctcbench.core.reference`). The ``S = 2L + 1`` states are kept
split, ``2L + 3`` doubles per row: ``[0..L]`` blank ``j``, ``[L + 1]`` a zero, ``[L + 2 + j]``
label ``j``, ``[2L + 2]`` a zero, so every update is a contiguous loop without branches (the
skip transition is a 0/1 factor). Emissions are gathered from the softmax rows when needed,
gamma is never stored, and long samples are checkpointed (:func:`segment_frames`).
A sample for which a scaled quantity falls below ``SAFE_FLOOR`` (the reference's rule), or whose
logits make a softmax row non-finite, is redone by the tilted rescue (:func:`sample_tilted`:
the same recursion on ``alpha exp(-tilt s)`` and ``beta exp(tilt s)``, which keeps random and
uniform logits at T in the thousands in probability space) and, if that fails the same checks,
by :func:`sample_log_space`: exact, slower, rare. Past those checks the gradient is finite
without looking: softmax rows lie in [0, 1], and each ``w * gamma`` term is ``w`` times a part
of a positive sum over that sum.
A float32 ``grad`` asks for the opt-in float32 compute: the same fast path on float32 rows,
guarded at ``SAFE_FLOOR32``, and the float64 paths for the samples it turns down
(:func:`sample_float32`).
Design and measurements: docs/numba.md.
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit, prange, types
from numba.extending import overload

from ctcbench.backends.numba_math import LOG_JIT, exp_nonpositive, lse3

SAFE_FLOOR = 1e-250  # below this, a scaled quantity may have lost mass to underflow
# Reassociation lets LLVM vectorise the row sums; inf/NaN semantics are kept (the log-space
# path relies on -inf), so no 'nnan'/'ninf'.
FASTMATH = {"reassoc", "contract", "nsz", "arcp"}
JIT = dict(cache=True, fastmath=FASTMATH, error_model="numpy", nogil=True)


WHOLE_TABLE_BYTES = 32 << 20  # a sample's forward rows kept whole up to this
SEGMENT_BYTES = 192 << 10  # past it, one segment's rows: sized to stay in L2
CHECKPOINT_BYTES = 64 << 20  # and at most this much of checkpointed rows per sample
# The forward row sums (each in [SAFE_FLOOR, 2]) are multiplied up and their log taken once the
# product leaves [SCALE_FLUSH, 1 / SCALE_FLUSH], not one log per frame: the product stays a
# normal float64 (>= 1e-300).
SCALE_FLUSH = 1e-50
# From this many labels on, the row loops take a blank and a label per iteration (fewer loads);
# below it, blanks then labels (shorter loops' remainders cost less): 1.38 against 1.59 ns/cell
# at L=200, 2.74 against 2.47 at L=40 (docs/numba.md, step 9). Either way the sums' order
# depends on L alone.
MERGE_MIN_L = 64
WORKSPACE_GAP = 64  # doubles between the arrays of a sample's workspace (see sample_fast)
FAST, TILTED, LOG_SPACE = 0, 1, 2  # the path a sample took (ctc_batch's ``path``)
SKIPPED = 5  # no recursion ran: no frames, or too few for the target (loss 0 or inf)
# The fast path hands a sample to the rescue early when the forward mass at the linear
# alignment's state falls below this fraction of the row's (random logits at T=3000-4000: by
# frame 470-670; inputs the fast path passes stayed above 1e-55, see docs/numba.md, step 12).
BAIL_BELOW = 1e-150
BAILED = -1e300  # sample_fast's return when it bailed (far below any loss, which rounding
# may leave a little below 0, e.g. -1e-9 from float32 rows)
# The opt-in float32 compute (a float32 grad): the fast path on float32 rows, 16 lanes a
# vector. float32's smallest normal is 1.2e-38; below SAFE_FLOOR32 a scaled float32 quantity
# may have lost mass. It bails at BAIL_BELOW32 (random logits at T=200 L=40 stay above it).
SAFE_FLOOR32 = 1e-30
BAIL_BELOW32 = 1e-16
FAST64 = 3  # float32 compute: a sample handed to the float64 paths, computed by their fast one
# (FAST is then the float32 rows; TILTED and LOG_SPACE are float64's)


@njit(**JIT)
def segment_frames(T_n, L, itemsize=8):
    """Frames per segment of the forward table: ``T_n`` (one segment, nothing recomputed)
    while the whole table fits ``WHOLE_TABLE_BYTES``; else as many as fit ``SEGMENT_BYTES``,
    more when the checkpoints would pass ``CHECKPOINT_BYTES``. Recomputing a segment costs
    one more forward pass over it, so a table that fits is kept whole (docs/numba.md).
    ``itemsize``: bytes per entry (4 for the float32 compute)."""
    W = 2 * L + 3
    if itemsize * T_n * W <= WHOLE_TABLE_BYTES:
        return T_n
    K = max(8, SEGMENT_BYTES // (itemsize * W))
    K = max(K, -(-itemsize * T_n * W // CHECKPOINT_BYTES))
    return min(K, T_n)


@njit(**JIT)
def row_sum(x, start, stop):
    """``sum(x[start:stop])`` in a loop that only reads: vectorised the same way wherever
    ``x`` lies, so the sum is bit-identical from call to call. (A loop that also stores may
    be given a runtime alias check whose scalar fallback adds in another order.)"""
    s = 0.0
    for i in range(start, stop):
        s += x[i]
    return s


@njit(**JIT)
def dot(x, y, stop):
    """``sum(x[:stop] * y[:stop])``, read-only like :func:`row_sum`."""
    s = 0.0
    for i in range(stop):
        s += x[i] * y[i]
    return s


@njit(**JIT)
def row_max(x):
    """``max(x)`` (NaN entries skipped, -inf if there is no other) in eight running maxima,
    which LLVM keeps in one vector register: a single running maximum is a chain of
    dependent comparisons it does not vectorise without the 'nnan' flag."""
    C = x.shape[0]
    C8 = C - C % 8
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = -np.inf
    for c in range(0, C8, 8):
        m0 = max(m0, np.float64(x[c]))
        m1 = max(m1, np.float64(x[c + 1]))
        m2 = max(m2, np.float64(x[c + 2]))
        m3 = max(m3, np.float64(x[c + 3]))
        m4 = max(m4, np.float64(x[c + 4]))
        m5 = max(m5, np.float64(x[c + 5]))
        m6 = max(m6, np.float64(x[c + 6]))
        m7 = max(m7, np.float64(x[c + 7]))
    m = max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))
    for c in range(C8, C):
        m = max(m, np.float64(x[c]))
    return m


@njit(**JIT)
def softmax_frame(x, row, tg, L, blank, e):
    """``row (C,) = softmax(x)``; ``e (L + 2,) = (p_blank, p_label_0, .., 0)``, gathered
    from ``row`` (so :func:`gather_emissions` of ``row`` gives the same bits). Returns
    whether the row is finite: it is unless ``x`` holds NaN or +inf, or only -inf."""
    C = x.shape[0]
    m = row_max(x)
    for c in range(C):
        row[c] = exp_nonpositive(np.float64(x[c]) - m)
    s = row_sum(row, 0, C)  # in float64 for either row dtype
    inv = row.dtype.type(1.0 / s)
    for c in range(C):
        row[c] *= inv
    gather_emissions(row, tg, L, blank, e)
    # then every exp(x - m) was in [0, 1] and s >= 1; a comparison, not np.isfinite, which
    # the fast-math flags let LLVM fold away
    return s < np.inf


@njit(**JIT)
def gather_emissions(row, tg, L, blank, e):
    """``e (L + 2,) = (row[blank], row[tg[0]], .., row[tg[L - 1]], 0)``."""
    e[0] = row[blank]
    for j in range(L):
        e[1 + j] = row[tg[j]]
    e[L + 1] = 0.0


@njit(**JIT)
def forward_row(p, a, e, k, skip, L):
    """Forward row ``a (2L + 3,)`` from the previous one ``p`` times ``k``, emissions ``e``;
    returns its sum. Blank ``j`` <- blank ``j``, label ``j - 1``; label ``j`` <- label ``j``,
    blank ``j``, label ``j - 1`` where ``skip[j]``.

    Every loop indexes views (slices) by its own counter only: an index like ``p[L + 1 + j]``
    might be negative as far as LLVM knows, and numba's wrap-around for negative indices
    turned those loads into AVX-512 gathers (docs/numba.md, step 8)."""
    eb = e[0] * k
    pb = p[:L + 1]  # blank j
    pl = p[L + 1:2 * L + 2]  # label j - 1 ([0] the zero before the labels)
    pc = p[L + 2:2 * L + 2]  # label j
    el = e[1:L + 1]
    ab = a[:L + 1]
    al = a[L + 2:2 * L + 2]
    sb = sl = a.dtype.type(0.0)  # the rows' dtype, so that float32 rows stay float32
    for j in range(L):  # blank j and label j together: they read the same p[j], p[L + 1 + j]
        u = pb[j]
        q = pl[j]
        v = eb * (u + q)
        ab[j] = v
        sb += v
        v = el[j] * k * (pc[j] + u + skip[j] * q)
        al[j] = v
        sl += v
    v = eb * (pb[L] + pl[L])
    ab[L] = v
    sb += v
    a[L + 1] = 0.0
    a[2 * L + 2] = 0.0
    return sb + sl


@njit(**JIT)
def backward_row(nb, cb, e1, kb, skip, a, P, L):
    """Backward row ``cb`` (scaled by ``kb``) from the next frame's ``nb`` and emissions
    ``e1``, and ``P (L,)``, ``alpha * beta`` of each label state with the forward row ``a``;
    returns the row's sum and ``sum alpha * beta`` over the blanks and over the labels.
    Blank ``j`` -> blank ``j``, label ``j``; label ``j`` -> label ``j``, blank ``j + 1``,
    label ``j + 1`` where ``skip[j + 1]``. Views indexed by the loop counter, as in
    :func:`forward_row`."""
    eb = e1[0] * kb
    nbb = nb[:L + 1]
    nbb1 = nb[1:L + 1]  # blank j + 1
    nbl = nb[L + 2:2 * L + 3]  # label j (and the zero at [2L + 2])
    nbl1 = nb[L + 3:2 * L + 3]  # label j + 1
    el = e1[1:L + 2]  # label j's emission (and the zero at e1[L + 1])
    el1 = e1[2:L + 2]
    sk1 = skip[1:L + 1]
    cbb = cb[:L + 1]
    cbl = cb[L + 2:2 * L + 2]
    ab = a[:L + 1]
    al = a[L + 2:2 * L + 2]
    db = zb = dl = zl = cb.dtype.type(0.0)
    for j in range(L):  # blank j and label j together, as in forward_row
        g = nbl[j] * el[j]
        v = nbb[j] * eb + g * kb
        cbb[j] = v
        db += v
        zb += ab[j] * v
        v = (g + sk1[j] * (nbl1[j] * el1[j])) * kb + nbb1[j] * eb
        cbl[j] = v
        dl += v
        q = al[j] * v
        P[j] = q
        zl += q
    v = nbb[L] * eb  # the last blank: label L does not exist (nb[2L + 2] = e1[L + 1] = 0)
    cbb[L] = v
    db += v
    zb += ab[L] * v
    return db + dl, zb, zl


@njit(**JIT)
def forward_row_split(p, a, e, k, skip, L):
    """:func:`forward_row` in two loops, blanks then labels: faster below ``MERGE_MIN_L``
    labels, where the loops' remainders weigh more than the loads saved by one loop."""
    eb = e[0] * k
    pb = p[:L + 1]  # blank j
    pl = p[L + 1:2 * L + 2]  # label j - 1 ([0] the zero before the labels)
    pc = p[L + 2:2 * L + 2]  # label j
    el = e[1:L + 1]
    ab = a[:L + 1]
    al = a[L + 2:2 * L + 2]
    sb = a.dtype.type(0.0)
    for j in range(L + 1):
        v = eb * (pb[j] + pl[j])
        ab[j] = v
        sb += v
    sl = a.dtype.type(0.0)
    for j in range(L):
        v = el[j] * k * (pc[j] + pb[j] + skip[j] * pl[j])
        al[j] = v
        sl += v
    a[L + 1] = 0.0
    a[2 * L + 2] = 0.0
    return sb + sl


@njit(**JIT)
def backward_row_split(nb, cb, e1, kb, skip, a, P, L):
    """:func:`backward_row` in two loops, blanks then labels (see :func:`forward_row_split`)."""
    eb = e1[0] * kb
    nbb = nb[:L + 1]
    nbb1 = nb[1:L + 1]  # blank j + 1
    nbl = nb[L + 2:2 * L + 3]  # label j (and the zero at [2L + 2])
    nbl1 = nb[L + 3:2 * L + 3]  # label j + 1
    el = e1[1:L + 2]  # label j's emission (and the zero at e1[L + 1])
    el1 = e1[2:L + 2]
    sk1 = skip[1:L + 1]
    cbb = cb[:L + 1]
    cbl = cb[L + 2:2 * L + 2]
    ab = a[:L + 1]
    al = a[L + 2:2 * L + 2]
    db = zb = cb.dtype.type(0.0)
    for j in range(L + 1):
        v = nbb[j] * eb + nbl[j] * el[j] * kb
        cbb[j] = v
        db += v
        zb += ab[j] * v
    dl = zl = cb.dtype.type(0.0)
    for j in range(L):
        v = (nbl[j] * el[j] + sk1[j] * nbl1[j] * el1[j]) * kb + nbb1[j] * eb
        cbl[j] = v
        dl += v
        q = al[j] * v
        P[j] = q
        zl += q
    return db + dl, zb, zl


@njit(**JIT)
def overlap_is_safe(z, c, d, floor=SAFE_FLOOR):
    """Whether ``z = sum_s alpha * beta`` of rows summing to ``c`` and ``d`` is exact enough:
    ``z / (c d)`` (the overlap of the normalised rows) at least ``floor`` (``SAFE_FLOOR``, or
    ``SAFE_FLOOR32`` for float32 rows), and ``z`` itself
    too, so that the products it sums lost nothing that matters to underflow. Not
    ``z >= floor * c * d``: its right side underflows to 0 when ``c`` and ``d`` are both
    small, and a zero ``z`` would pass."""
    return z >= floor and z / c / d >= floor


@njit(**JIT)
def sample_fast(logits, grad, n, tg, T_n, L, blank, w, skip, dt, floor, bail):
    """Scaled forward-backward of sample ``n`` in rows of dtype ``dt`` (``np.float64``, or
    ``np.float32`` for the float32 compute) with ``floor`` its ``SAFE_FLOOR``; returns its
    loss, or NaN when it is unsafe or a softmax row is not finite (the caller then tries the
    rescue, then log space).
    ``skip (L + 1,)``: 1.0 where label ``j`` may be entered from label ``j - 1``
    (``skip[L] = 0``). ``bail > 0``: every ``TILT_PERIOD`` frames, when the forward row's
    mass at the state a linear alignment would be in is below ``bail`` of the row's, return
    ``BAILED`` there: the overlap guard would most likely fail near the end of the backward
    pass, after all the work (docs/numba.md, step 12); the caller tries the rescue first.

    Emissions are never stored: each pass gathers a frame's from its softmax row (the
    backward pass before it writes the gradient there), bit for bit the same each time.
    Checkpointed: the frames are cut into segments of ``K`` (:func:`segment_frames`); the
    forward pass keeps the first row of each segment and every row sum, the backward pass
    recomputes one segment's rows at a time, so the rows it reads stay in cache. A sample of
    one segment is computed once."""
    W = 2 * L + 3  # row width, see the module docstring
    merge = L >= MERGE_MIN_L  # row loops: a blank and a label per iteration, or split
    K = segment_frames(T_n, L, np.empty(0, dt).itemsize)
    n_seg = -(-T_n // K)
    # Every array the recursions read or write is carved out of one workspace at fixed
    # offsets (with gaps): a vectorised loop that stores and sums gets a runtime alias check,
    # and its scalar fallback adds in another order. With separate allocations, whether that
    # check passed depended on where the allocator put them (it differed with the thread
    # count); here it depends on T_n and L alone, and the gaps make it pass.
    G = WORKSPACE_GAP
    o_first = K * W + G
    o_cs = o_first + n_seg * W + G
    o_e = o_cs + T_n + G
    o_e1 = o_e + L + 2 + G
    o_nb = o_e1 + L + 2 + G
    o_cb = o_nb + W + G
    o_P = o_cb + W + G
    o_skip = o_P + L + G
    ws = np.empty(o_skip + L + 1 + G, dtype=dt)
    zero, one = ws.dtype.type(0.0), ws.dtype.type(1.0)  # constants in the rows' dtype
    wd = ws.dtype.type(w)  # the weight too, so that the gradient step stays in it
    A = ws[:K * W].reshape((K, W))  # (K, W) one segment's forward rows, scaled by the
    # previous row sum
    first = ws[o_first:o_first + n_seg * W].reshape((n_seg, W))  # (n_seg, W) each
    # segment's first forward row
    cs = ws[o_cs:o_cs + T_n]  # (T_n,) forward row sums
    e = ws[o_e:o_e + L + 2]  # (L + 2,) the emissions of frame t (see gather_emissions)
    e1 = ws[o_e1:o_e1 + L + 2]  # (L + 2,) those of frame t + 1, in the backward pass
    nb = ws[o_nb:o_nb + W]  # (W,) beta at frame t + 1 (scaled), in the backward pass
    cb = ws[o_cb:o_cb + W]  # (W,) beta at frame t
    P = ws[o_P:o_P + L]  # (L,) alpha * beta of each label state at frame t
    sk = ws[o_skip:o_skip + L + 1]  # (L + 1,) skip, copied into the workspace
    for j in range(L + 1):
        sk[j] = skip[j]
    skip = sk
    log_scale = 0.0  # plus log(scale): the log of the product of the row sums so far
    scale = 1.0
    # t = 0: only the first blank and the first label can start a path
    if not softmax_frame(logits[0, n], grad[0, n], tg, L, blank, e):
        return np.nan
    for i in range(W):
        A[0, i] = 0.0
    A[0, 0] = e[0]
    if L > 0:
        A[0, L + 2] = e[1]
    c_prev = A[0, 0] + (A[0, L + 2] if L > 0 else zero)
    cs[0] = c_prev
    if c_prev < floor:
        return np.nan
    first[0] = A[0]
    i = 0  # row of frame t in A
    for t in range(1, T_n):
        prev = i
        i = i + 1 if i + 1 < K else 0
        if not softmax_frame(logits[t, n], grad[t, n], tg, L, blank, e):
            return np.nan
        scale *= c_prev  # the row sums' product, in log_scale when it gets small
        if not SCALE_FLUSH <= scale <= 1.0 / SCALE_FLUSH:
            log_scale += math.log(scale)
            scale = 1.0
        if merge:
            s = forward_row(A[prev], A[i], e, one / c_prev, skip, L)
        else:
            s = forward_row_split(A[prev], A[i], e, one / c_prev, skip, L)
        if s < floor:
            return np.nan
        if bail > 0.0 and t % TILT_PERIOD == 0:
            j = (L * t + (T_n - 1) // 2) // (T_n - 1)  # the linear alignment's pair
            a = A[i]
            if a[j] + (a[L + 2 + j] if j < L else zero) < bail * s:
                return BAILED
        if i == 0:
            first[t // K] = A[0]
        c_prev = s
        cs[t] = s
    last = A[i]  # A now holds the last segment
    final = np.float64(last[L]) + (np.float64(last[2 * L + 1]) if L > 0 else 0.0)
    if not final > 0.0:
        return np.nan
    loss = -(log_scale + math.log(scale) + math.log(final))

    # backward: nb holds beta at frame t + 1 (scaled), cb the one at t; blank j -> blank j,
    # label j; label j -> label j, blank j + 1, label j + 1 where allowed
    for i in range(W):
        nb[i] = 0.0
        cb[i] = 0.0
    t = T_n - 1
    cb[L] = 1.0
    zb = last[L]
    zl = zero
    if L > 0:
        cb[2 * L + 1] = 1.0
        zl = last[2 * L + 1]
    d = one + one if L > 0 else one
    if not overlap_is_safe(zb + zl, cs[t], d, floor):
        return np.nan
    zinv = wd / (zb + zl)
    row = grad[t, n]
    gather_emissions(row, tg, L, blank, e)
    if w != 1.0:
        for c in range(row.shape[0]):
            row[c] *= wd
    row[blank] -= zb * zinv
    if L > 0:
        row[tg[L - 1]] -= zl * zinv
    for seg in range(n_seg - 1, -1, -1):
        t0 = seg * K
        if seg < n_seg - 1:  # recompute this segment's rows from its first one
            A[0] = first[seg]
            for i in range(1, K):
                gather_emissions(grad[t0 + i, n], tg, L, blank, e1)
                if merge:
                    forward_row(A[i - 1], A[i], e1, one / cs[t0 + i - 1], skip, L)
                else:
                    forward_row_split(A[i - 1], A[i], e1, one / cs[t0 + i - 1], skip, L)
        for t in range(min(t0 + K, T_n - 1) - 1, t0 - 1, -1):
            nb, cb = cb, nb
            e, e1 = e1, e  # e1: frame t + 1's, gathered by the step before
            row = grad[t, n]
            gather_emissions(row, tg, L, blank, e)  # frame t's, before the gradient goes in
            a = A[t - t0]
            if merge:
                d, zb, zl = backward_row(nb, cb, e1, one / d, skip, a, P, L)
            else:
                d, zb, zl = backward_row_split(nb, cb, e1, one / d, skip, a, P, L)
            z = zb + zl
            if not (d >= floor and overlap_is_safe(z, cs[t], d, floor)):
                return np.nan
            zinv = wd / z
            if w != 1.0:
                for c in range(row.shape[0]):
                    row[c] *= wd
            row[blank] -= zb * zinv
            for j in range(L):
                row[tg[j]] -= P[j] * zinv
    return loss


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
    if w != 1.0:
        for c in range(row.shape[0]):
            row[c] *= w
    row[blank] -= zb * zinv
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
            if w != 1.0:
                for c in range(row.shape[0]):
                    row[c] *= w
            row[blank] -= zb * zinv
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


@njit(**JIT)
def sample_float64(logits, grad, n, tg, T_n, L, blank, w, skip):
    """Sample ``n`` in float64 rows: the fast path (bailing early when it would most likely
    fail), the tilted rescue, log space; returns ``(loss, path)``."""
    value = sample_fast(logits, grad, n, tg, T_n, L, blank, w, skip, np.float64, SAFE_FLOOR,
                        BAIL_BELOW)
    path = FAST
    tilted = value == BAILED
    if tilted:  # predicted to fail: the rescue first, then the plain path after all
        value = sample_tilted(logits, grad, n, tg, T_n, L, blank, w, skip)
        path = TILTED
        if np.isnan(value):
            value = sample_fast(logits, grad, n, tg, T_n, L, blank, w, skip, np.float64,
                                SAFE_FLOOR, 0.0)
            path = FAST
    if np.isnan(value) and not tilted:
        value = sample_tilted(logits, grad, n, tg, T_n, L, blank, w, skip)
        path = TILTED
    if np.isnan(value):
        value = sample_log_space(logits, grad, n, tg, T_n, L, blank, w)
        path = LOG_SPACE
    return value, path


@njit(**JIT)
def sample_float32(logits, grad, n, tg, T_n, L, blank, w, skip):
    """Sample ``n`` in float32 rows (the opt-in float32 compute): the fast path, bailing
    early at ``BAIL_BELOW32``, else :func:`sample_float64` into the same float32 gradient;
    returns ``(loss, path)``, path ``FAST`` (float32), ``FAST64``, ``TILTED`` or
    ``LOG_SPACE``. (A float32 tilted rescue, tried and measured, was slower than the float64
    fast path at every size where it was needed: docs/numba.md.)"""
    value = sample_fast(logits, grad, n, tg, T_n, L, blank, w, skip, np.float32,
                        SAFE_FLOOR32, BAIL_BELOW32)
    if not (np.isnan(value) or value == BAILED):
        return value, FAST
    value, path = sample_float64(logits, grad, n, tg, T_n, L, blank, w, skip)  # NaN or bailed
    return value, FAST64 if path == FAST else path


def sample_by_dtype(logits, grad, n, tg, T_n, L, blank, w, skip):
    """:func:`sample_float32` for a float32 ``grad``, else :func:`sample_float64`: chosen
    when ``ctc_batch`` is compiled (an ``if`` on the dtype would compile both for each)."""
    raise NotImplementedError("compiled code only")


@overload(sample_by_dtype)
def _sample_by_dtype(logits, grad, n, tg, T_n, L, blank, w, skip):
    if grad.dtype == types.float32:
        return lambda logits, grad, n, tg, T_n, L, blank, w, skip: sample_float32(
            logits, grad, n, tg, T_n, L, blank, w, skip)
    return lambda logits, grad, n, tg, T_n, L, blank, w, skip: sample_float64(
        logits, grad, n, tg, T_n, L, blank, w, skip)


@njit(parallel=True, **JIT)
def ctc_batch(logits, targets, input_lengths, target_lengths, blank, weights, loss, grad,
              path):
    """Fill ``loss (N,)``, ``grad (T, N, C)`` (every element written) and ``path (N,)`` int8
    (the path each sample took: ``FAST``, ``TILTED``, ``LOG_SPACE``, ``FAST64`` or
    ``SKIPPED``) for ``logits (T, N, C)``
    float32/64, ``targets (N, L)`` int64, lengths ``(N,)`` int64, ``weights (N,)`` float64.
    A float32 ``grad`` asks for the float32 compute (:func:`sample_float32`). Callers
    should launch it with ``numba.set_parallel_chunksize(1)`` (see ``numba_ctc``); set in
    here, it would keep numba from caching the compiled kernel."""
    T, N, C = logits.shape
    for n in prange(N):
        T_n, L = input_lengths[n], target_lengths[n]
        tg = targets[n]
        w = weights[n]
        repeats = 0
        for j in range(1, L):
            if tg[j] == tg[j - 1]:
                repeats += 1
        if T_n == 0 or T_n < L + repeats:  # no frames, or too few: only an empty target fits
            path[n] = SKIPPED
            loss[n] = 0.0 if L == 0 else np.inf
            for t in range(T):
                grad[t, n, :] = 0.0
            continue
        skip = np.zeros(L + 1)  # (L + 1,) 1.0 where label j may follow label j - 1 directly
        for j in range(1, L):
            if tg[j] != tg[j - 1]:
                skip[j] = 1.0
        loss[n], path[n] = sample_by_dtype(logits, grad, n, tg, T_n, L, blank, w, skip)
        for t in range(T_n, T):  # padded frames: zero, never read
            grad[t, n, :] = 0.0
