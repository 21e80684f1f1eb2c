"""The shared parts of backend ``numba``'s kernels (:mod:`ctcbench.backends.numba.kernels`):
compile options, sizes, the softmax of a frame and the forward and backward rows of the fast
path, each for float64 or float32 rows (their dtype comes from the arrays). The row layout
(``2L + 3`` entries: blanks, a zero, labels, a zero) is described in ``kernels``. The
kernels call them through the ``*_at`` functions at the end, which take tables and indices.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ctcbench.backends.numba.primitives import exp_nonpositive

SAFE_FLOOR = 1e-250  # below this, a scaled quantity may have lost mass to underflow
# Reassociation lets LLVM vectorise the row sums; inf/NaN semantics are kept (the log-space
# path relies on -inf), so no 'nnan'/'ninf'.
FASTMATH = {"reassoc", "contract", "nsz", "arcp"}
JIT = dict(cache=True, fastmath=FASTMATH, error_model="numpy", nogil=True)


WHOLE_TABLE_BYTES = 8 << 20  # a sample's forward rows kept whole up to this; past it they are
# recomputed from checkpoints, cheaper than streaming a large table (docs/numba.md, step 15)
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


@njit(inline="always", **JIT)
def row_sum(x, start, stop):
    """``sum(x[start:stop])`` in a loop that only reads: vectorised the same way wherever
    ``x`` lies, so the sum is bit-identical from call to call. (A loop that also stores may
    be given a runtime alias check whose scalar fallback adds in another order.)"""
    s = 0.0
    for i in range(start, stop):
        s += x[i]
    return s


@njit(inline="always", **JIT)
def dot(x, y, stop):
    """``sum(x[:stop] * y[:stop])``, read-only like :func:`row_sum`."""
    s = 0.0
    for i in range(stop):
        s += x[i] * y[i]
    return s


@njit(inline="always", **JIT)
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


@njit(inline="always", **JIT)
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


@njit(inline="always", **JIT)
def gather_emissions(row, tg, L, blank, e):
    """``e (L + 2,) = (row[blank], row[tg[0]], .., row[tg[L - 1]], 0)``."""
    e[0] = row[blank]
    for j in range(L):
        e[1 + j] = row[tg[j]]
    e[L + 1] = 0.0


@njit(**JIT)
def first_forward_row(a, e, L):
    """The forward row ``a (2L + 3,)`` of frame 0 from its emissions ``e``: only blank 0 and
    label 0 start a path."""
    for i in range(a.shape[0]):
        a[i] = 0.0
    a[0] = e[0]
    if L > 0:
        a[L + 2] = e[1]


@njit(inline="always", **JIT)
def forward_views(p, a, e, L):
    """The views a forward row's loops index by their counter (see :func:`forward_row`):
    ``p``'s blank ``j``, label ``j - 1`` ([0] the zero before the labels) and label ``j``;
    label ``j``'s emission; ``a``'s blanks and labels."""
    return (p[:L + 1], p[L + 1:2 * L + 2], p[L + 2:2 * L + 2], e[1:L + 1], a[:L + 1],
            a[L + 2:2 * L + 2])


@njit(inline="always", **JIT)
def backward_views(nb, cb, e1, skip, a, L):
    """The views a backward row's loops index by their counter: ``nb``'s blank ``j``, blank
    ``j + 1``, label ``j`` (and the zero at [2L + 2]) and label ``j + 1``; the emissions of
    label ``j`` (and the zero at ``e1[L + 1]``) and ``j + 1``; ``skip[j + 1]``; ``cb``'s and
    ``a``'s blanks and labels."""
    return (nb[:L + 1], nb[1:L + 1], nb[L + 2:2 * L + 3], nb[L + 3:2 * L + 3], e1[1:L + 2],
            e1[2:L + 2], skip[1:L + 1], cb[:L + 1], cb[L + 2:2 * L + 2], a[:L + 1],
            a[L + 2:2 * L + 2])


@njit(inline="always", **JIT)
def forward_row(p, a, e, k, skip, L):
    """Forward row ``a (2L + 3,)`` from the previous one ``p`` times ``k``, emissions ``e``;
    returns its sum. Blank ``j`` <- blank ``j``, label ``j - 1``; label ``j`` <- label ``j``,
    blank ``j``, label ``j - 1`` where ``skip[j]``.

    Every loop indexes views (slices) by its own counter only: an index like ``p[L + 1 + j]``
    might be negative as far as LLVM knows, and numba's wrap-around for negative indices
    turned those loads into AVX-512 gathers (docs/numba.md, step 8)."""
    eb = e[0] * k
    pb, pl, pc, el, ab, al = forward_views(p, a, e, L)
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


@njit(inline="always", **JIT)
def backward_row(nb, cb, e1, kb, skip, a, P, L):
    """Backward row ``cb`` (scaled by ``kb``) from the next frame's ``nb`` and emissions
    ``e1``, and ``P (L,)``, ``alpha * beta`` of each label state with the forward row ``a``;
    returns the row's sum and ``sum alpha * beta`` over the blanks and over the labels.
    Blank ``j`` -> blank ``j``, label ``j``; label ``j`` -> label ``j``, blank ``j + 1``,
    label ``j + 1`` where ``skip[j + 1]``. Views indexed by the loop counter, as in
    :func:`forward_row`."""
    eb = e1[0] * kb
    nbb, nbb1, nbl, nbl1, el, el1, sk1, cbb, cbl, ab, al = \
        backward_views(nb, cb, e1, skip, a, L)
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


@njit(inline="always", **JIT)
def forward_row_split(p, a, e, k, skip, L):
    """:func:`forward_row` in two loops, blanks then labels: faster below ``MERGE_MIN_L``
    labels, where the loops' remainders weigh more than the loads saved by one loop."""
    eb = e[0] * k
    pb, pl, pc, el, ab, al = forward_views(p, a, e, L)
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


@njit(inline="always", **JIT)
def backward_row_split(nb, cb, e1, kb, skip, a, P, L):
    """:func:`backward_row` in two loops, blanks then labels (see :func:`forward_row_split`)."""
    eb = e1[0] * kb
    nbb, nbb1, nbl, nbl1, el, el1, sk1, cbb, cbl, ab, al = \
        backward_views(nb, cb, e1, skip, a, L)
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


# -- what the kernels call once a frame: a table or batch and row indices, not row views ------
# A row view made in a kernel's loop and passed to a function costs two atomic updates of its
# array's reference count (numba's NRT_incref/NRT_decref), which numba's pruning of reference
# counts leaves in loops with calls and early returns: about a fifth of the kernel's time at
# T=400 N=32 C=80 L=60. Made here, in functions that call nothing (the functions above are
# inlined: a function that calls another keeps its own arguments' counts too), the counts are
# pruned (docs/numba.md, step 19). ``grad`` and ``logits`` are (T, N, C), ``A`` a
# (frames, 2L + 3) table; sample ``n``'s gradient rows are ``grad[:, gn]``.
@njit(**JIT)
def softmax_frame_at(logits, grad, t, n, gn, tg, L, blank, e):
    """:func:`softmax_frame` of frame ``t`` of sample ``n`` into ``grad[t, gn]``."""
    return softmax_frame(logits[t, n], grad[t, gn], tg, L, blank, e)


@njit(**JIT)
def gather_emissions_at(grad, t, gn, tg, L, blank, e):
    """:func:`gather_emissions` of ``grad[t, gn]``."""
    gather_emissions(grad[t, gn], tg, L, blank, e)


# One function per loop shape, the caller choosing by ``MERGE_MIN_L``: a view made in one
# branch of a function keeps its counts.
@njit(**JIT)
def forward_row_at(A, prev, i, e, k, skip, L):
    """:func:`forward_row` of ``A[i]`` from ``A[prev]``; returns its sum."""
    return forward_row(A[prev], A[i], e, k, skip, L)


@njit(**JIT)
def forward_row_split_at(A, prev, i, e, k, skip, L):
    """:func:`forward_row_split` of ``A[i]`` from ``A[prev]``; returns its sum."""
    return forward_row_split(A[prev], A[i], e, k, skip, L)


@njit(**JIT)
def backward_row_at(nb, cb, e1, kb, skip, A, i, P, L):
    """:func:`backward_row` with the forward row ``A[i]``."""
    return backward_row(nb, cb, e1, kb, skip, A[i], P, L)


@njit(**JIT)
def backward_row_split_at(nb, cb, e1, kb, skip, A, i, P, L):
    """:func:`backward_row_split` with the forward row ``A[i]``."""
    return backward_row_split(nb, cb, e1, kb, skip, A[i], P, L)


@njit(**JIT)
def gradient_frame(grad, t, gn, blank, w, zb, zinv, tg, P, L):
    """Frame ``t``'s gradient in ``grad[t, gn]``, which holds its softmax: times the weight
    ``w`` (in the rows' dtype), minus the posterior: the blanks' share ``zb * zinv``, label
    ``j``'s ``P[j] * zinv``."""
    row = grad[t, gn]
    if w != 1.0:
        for c in range(row.shape[0]):
            row[c] *= w
    row[blank] -= zb * zinv
    for j in range(L):
        row[tg[j]] -= P[j] * zinv


@njit(**JIT)
def overlap_is_safe(z, c, d, floor=SAFE_FLOOR):
    """Whether ``z = sum_s alpha * beta`` of rows summing to ``c`` and ``d`` is exact enough:
    ``z / (c d)`` (the overlap of the normalised rows) at least ``floor`` (``SAFE_FLOOR``, or
    ``SAFE_FLOOR32`` for float32 rows), and ``z`` itself
    too, so that the products it sums lost nothing that matters to underflow. Not
    ``z >= floor * c * d``: its right side underflows to 0 when ``c`` and ``d`` are both
    small, and a zero ``z`` would pass."""
    return z >= floor and z / c / d >= floor
