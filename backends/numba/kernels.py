"""The compiled CTC kernels behind backend ``numba`` (``backends/numba/backend.py``).

Shape letters as in :mod:`ctcbench.core.problem`; per sample ``T_n`` frames, ``L_n`` labels.
One call of :func:`ctc_batch` does the samples it is given: softmax, forward and backward
recursions, loss and gradient w.r.t. the logits, each sample start to end in the calling thread
(so the result does not depend on how many threads share the batch).

Fast path (:func:`sample_fast`): probability space, each row divided by the previous row's sum
(Rabiner's scaling, as in :mod:`ctcbench.core.reference`). The ``S = 2L + 1`` states are kept
split, ``2L + 3`` doubles per row: ``[0..L]`` blank ``j``, ``[L + 1]`` a zero, ``[L + 2 + j]``
label ``j``, ``[2L + 2]`` a zero, so every update is a contiguous loop without branches (the
skip transition is a 0/1 factor). Emissions are gathered from the softmax rows when needed,
gamma is never stored, and long samples are checkpointed (:func:`segment_frames`).
A sample for which a scaled quantity falls below ``SAFE_FLOOR`` (the reference's rule), or whose
logits make a softmax row non-finite, is redone by the blocked rescue
(``blocks.sample_blocked``: the same recursion with each block of 8 (blank, label)
pairs at its own power-of-two scale, which keeps random and uniform logits at any T in
probability space) and, if that fails its checks, by :func:`sample_log_space`: exact,
slower, rare. Past those checks the gradient is finite
without looking: softmax rows lie in [0, 1], and each ``w * gamma`` term is ``w`` times a part
of a positive sum over that sum.
The opt-in float32 compute is a kernel of its own, :func:`ctc_batch32`: the same fast path on
float32 rows, guarded at ``SAFE_FLOOR32``, and the float64 paths for the samples it turns down
(:func:`sample_float32`). ``KERNELS`` maps (compute dtype, gradient dtype) to its kernel:
the float64 compute also stores a float32 gradient (:func:`ctc_batch_rounded`).
Design and measurements: docs/numba.md.
"""
from __future__ import annotations

import enum
import math

import numpy as np
from numba import njit

from ctcbench.backends.numba.primitives import (FLUSH_SUBNORMALS, get_fp_control, prefetch_row,
                                               set_fp_control)
from ctcbench.backends.numba.blocks import sample_blocked
from ctcbench.backends.numba.rescue import sample_log_space
from ctcbench.backends.numba.rows import (JIT, MERGE_MIN_L, SAFE_FLOOR, SCALE_FLUSH, WORKSPACE_GAP,
                                          backward_row_at, backward_row_split_at,
                                          first_forward_row, forward_row_at,
                                          forward_row_split_at, gather_emissions_at,
                                          gradient_frame, overlap_is_safe, segment_frames,
                                          softmax_frame_at)


class SamplePath(enum.IntEnum):
    """The path a sample took (ctc_batch's ``path``, one int8 per sample)."""

    FAST = 0  # the scaled probability-space rows (float32 rows under float32 compute)
    BLOCKED = 1  # the blocked probability-space rescue (float64)
    LOG_SPACE = 2  # the log-space rows (float64)
    FAST64 = 3  # float32 compute: a sample handed to the float64 paths, taken by their fast one
    SKIPPED = 5  # no recursion ran: no frames, or too few for the target (loss 0 or inf)


# the same codes as plain ints, which the compiled kernels read as constants
FAST, BLOCKED, LOG_SPACE, FAST64, SKIPPED = (int(p) for p in SamplePath)

# The fast path hands a sample to the rescue early when the forward mass at the linear
# alignment's state falls below this fraction of the row's: random logits at T=2000 L=200 fell
# below 1e-100 in all 16 samples, 11 of which failed the backward guard at 1e-150; at T=1500,
# 1 of 16 that would have passed (docs/numba.md, steps 12 and 18).
BAIL_BELOW = 1e-100
BAIL_PERIOD = 16  # frames between two of those checks
BAILED = -1e300  # sample_fast's return when it bailed (far below any loss, which rounding
# may leave a little below 0, e.g. -1e-9 from float32 rows)
# The opt-in float32 compute (ctc_batch32): the fast path on float32 rows, 16 lanes
# a vector. float32's smallest normal is 1.2e-38; below SAFE_FLOOR32 a scaled float32 quantity
# may have lost mass. It bails at BAIL_BELOW32 (random logits at T=200 L=40 stay above it).
SAFE_FLOOR32 = 1e-30
BAIL_BELOW32 = 1e-16


@njit(**JIT)
def sample_fast(logits, grad, n, gn, tg, T_n, L, blank, w, skip, dt, floor, bail):
    """Scaled forward-backward of sample ``n`` in rows of dtype ``dt`` (``np.float64``, or
    ``np.float32`` for the float32 compute) with ``floor`` its ``SAFE_FLOOR``; returns its
    loss, or NaN when it is unsafe or a softmax row is not finite (the caller then tries the
    rescue, then log space).
    Its logits are ``logits[:, n]``, its gradient rows ``grad[:, gn]``: ``gn = n``, or 0
    where ``grad`` is a one-sample scratch (:func:`ctc_batch_rounded`); the same for the
    other ``sample_*`` functions.
    ``skip (L + 1,)``: 1.0 where label ``j`` may be entered from label ``j - 1``
    (``skip[L] = 0``). ``bail > 0``: every ``BAIL_PERIOD`` frames, when the forward row's
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
    if not softmax_frame_at(logits, grad, 0, n, gn, tg, L, blank, e):
        return np.nan
    first_forward_row(A[0], e, L)
    c_prev = A[0, 0] + (A[0, L + 2] if L > 0 else zero)
    cs[0] = c_prev
    if c_prev < floor:
        return np.nan
    first[0] = A[0]
    i = 0  # row of frame t in A
    for t in range(1, T_n):
        prev = i
        i = i + 1 if i + 1 < K else 0
        if t + 1 < T_n:  # the next frame's rows, on another page (primitives.prefetch_row)
            prefetch_row(logits, t + 1, n)
            prefetch_row(grad, t + 1, gn)
        if not softmax_frame_at(logits, grad, t, n, gn, tg, L, blank, e):
            return np.nan
        scale *= c_prev  # the row sums' product, in log_scale when it gets small
        if not SCALE_FLUSH <= scale <= 1.0 / SCALE_FLUSH:
            log_scale += math.log(scale)
            scale = 1.0
        if merge:
            s = forward_row_at(A, prev, i, e, one / c_prev, skip, L)
        else:
            s = forward_row_split_at(A, prev, i, e, one / c_prev, skip, L)
        if s < floor:
            return np.nan
        if bail > 0.0 and t % BAIL_PERIOD == 0:
            j = (L * t + (T_n - 1) // 2) // (T_n - 1)  # the linear alignment's pair
            if A[i, j] + (A[i, L + 2 + j] if j < L else zero) < bail * s:
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
    gather_emissions_at(grad, t, gn, tg, L, blank, e)
    for j in range(L):  # the last frame: only label L - 1 ends a path
        P[j] = zl if j == L - 1 else zero
    gradient_frame(grad, t, gn, blank, wd, zb, zinv, tg, P, L)
    for seg in range(n_seg - 1, -1, -1):
        t0 = seg * K
        if seg < n_seg - 1:  # recompute this segment's rows from its first one
            A[0] = first[seg]
            for i in range(1, K):
                prefetch_row(grad, t0 + i + 1, gn)  # t0 + K < T_n: not the last segment
                gather_emissions_at(grad, t0 + i, gn, tg, L, blank, e1)
                if merge:
                    forward_row_at(A, i - 1, i, e1, one / cs[t0 + i - 1], skip, L)
                else:
                    forward_row_split_at(A, i - 1, i, e1, one / cs[t0 + i - 1], skip, L)
        for t in range(min(t0 + K, T_n - 1) - 1, t0 - 1, -1):
            if t > 0:
                prefetch_row(grad, t - 1, gn)
            nb, cb = cb, nb
            e, e1 = e1, e  # e1: frame t + 1's, gathered by the step before
            gather_emissions_at(grad, t, gn, tg, L, blank, e)  # before the gradient goes in
            if merge:
                d, zb, zl = backward_row_at(nb, cb, e1, one / d, skip, A, t - t0, P, L)
            else:
                d, zb, zl = backward_row_split_at(nb, cb, e1, one / d, skip, A, t - t0, P, L)
            z = zb + zl
            if not (d >= floor and overlap_is_safe(z, cs[t], d, floor)):
                return np.nan
            gradient_frame(grad, t, gn, blank, wd, zb, wd / z, tg, P, L)
    return loss


@njit(inline="always", **JIT)
def sample_float64(logits, grad, n, gn, tg, T_n, L, blank, w, skip):
    """Sample ``n`` in float64 rows: the fast path (bailing early when it would most likely
    fail), the blocked rescue, log space; returns ``(loss, path)``."""
    value = sample_fast(logits, grad, n, gn, tg, T_n, L, blank, w, skip, np.float64,
                        SAFE_FLOOR, BAIL_BELOW)
    path = FAST
    bailed = value == BAILED
    if bailed:  # predicted to fail: the rescue first, then the plain path after all
        value = sample_blocked(logits, grad, n, gn, tg, T_n, L, blank, w, skip)
        path = BLOCKED
        if np.isnan(value):
            value = sample_fast(logits, grad, n, gn, tg, T_n, L, blank, w, skip, np.float64,
                                SAFE_FLOOR, 0.0)
            path = FAST
    if np.isnan(value) and not bailed:
        value = sample_blocked(logits, grad, n, gn, tg, T_n, L, blank, w, skip)
        path = BLOCKED
    if np.isnan(value):
        value = sample_log_space(logits, grad, n, gn, tg, T_n, L, blank, w)
        path = LOG_SPACE
    return value, path


@njit(**JIT)
def sample_float32(logits, grad, n, gn, tg, T_n, L, blank, w, skip):
    """Sample ``n`` in float32 rows (the opt-in float32 compute): the fast path, bailing
    early at ``BAIL_BELOW32``, else :func:`sample_float64` into the same float32 gradient;
    returns ``(loss, path)``, path ``FAST`` (float32), ``FAST64``, ``BLOCKED`` or
    ``LOG_SPACE``. (A float32 rescue, tried and measured, was slower than the float64 fast
    path at every size where it was needed: docs/numba.md.)"""
    value = sample_fast(logits, grad, n, gn, tg, T_n, L, blank, w, skip, np.float32,
                        SAFE_FLOOR32, BAIL_BELOW32)
    if not (np.isnan(value) or value == BAILED):
        return value, FAST
    value, path = sample_float64(logits, grad, n, gn, tg, T_n, L, blank, w, skip)  # NaN/bailed
    return value, FAST64 if path == FAST else path


@njit(inline="always", **JIT)
def batch_sample(logits, targets, input_lengths, target_lengths, blank, weights, loss, grad,
                 path, n, gn, sample):
    """Sample ``n`` of a :func:`ctc_batch` call: its loss, path and every gradient entry (in
    ``grad[:, gn]``), by ``sample`` (:func:`sample_float64` or :func:`sample_float32`)."""
    T = logits.shape[0]
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
            grad[t, gn, :] = 0.0
        return
    skip = np.zeros(L + 1)  # (L + 1,) 1.0 where label j may follow label j - 1 directly
    for j in range(1, L):
        if tg[j] != tg[j - 1]:
            skip[j] = 1.0
    loss[n], path[n] = sample(logits, grad, n, gn, tg, T_n, L, blank, w, skip)
    for t in range(T_n, T):  # padded frames: zero, never read
        grad[t, gn, :] = 0.0


@njit(**JIT)
def ctc_batch(logits, targets, input_lengths, target_lengths, blank, weights, loss, grad,
              path, samples):
    """Fill ``loss[n]``, ``grad[:, n]`` (every element written) and ``path[n]`` (the path the
    sample took: ``FAST``, ``BLOCKED``, ``LOG_SPACE``, ``FAST64`` or ``SKIPPED``) for each
    sample ``n`` of ``samples (K,)`` int64, given ``logits (T, N, C)`` float32/64, ``targets
    (N, L)`` int64, lengths ``(N,)`` int64, ``weights (N,)`` float64; ``loss (N,)``, ``grad
    (T, N, C)`` float64, ``path (N,)`` int8. Serial and ``nogil``: threads share a batch by
    calling it on disjoint ``samples`` (``backend.launch``), so one compiled kernel serves
    every thread count, and numba builds no parallel loop (docs/numba.md, "Compilation")."""
    control = get_fp_control()
    set_fp_control(control | FLUSH_SUBNORMALS)  # subnormals are 0 here (primitives)
    for i in range(samples.shape[0]):
        batch_sample(logits, targets, input_lengths, target_lengths, blank, weights, loss,
                     grad, path, samples[i], samples[i], sample_float64)
    set_fp_control(control)


@njit(**JIT)
def ctc_batch_rounded(logits, targets, input_lengths, target_lengths, blank, weights, loss,
                      grad, path, samples):
    """:func:`ctc_batch` into a float32 ``grad``: each sample computed in float64 in a
    ``(T, 1, C)`` scratch of its own, as :func:`ctc_batch` computes it in ``grad``, then
    rounded once into ``grad[:, n]`` (the float64 gradient cast to float32, without a
    float64 ``(T, N, C)`` array: ``ctcbench.torch``'s float32 tensors, docs/numba.md)."""
    T, _, C = grad.shape
    rows = np.empty((T, 1, C))  # (T, 1, C) one sample's float64 gradient rows
    control = get_fp_control()
    set_fp_control(control | FLUSH_SUBNORMALS)  # subnormals are 0 here (primitives)
    for i in range(samples.shape[0]):
        n = samples[i]
        batch_sample(logits, targets, input_lengths, target_lengths, blank, weights, loss,
                     rows, path, n, 0, sample_float64)
        for t in range(T):
            if t + 8 < T:  # 8 rows ahead: a copy leaves less time to hide a miss
                prefetch_row(grad, t + 8, n)
            for c in range(C):
                grad[t, n, c] = rows[t, 0, c]
    set_fp_control(control)


@njit(**JIT)
def ctc_batch32(logits, targets, input_lengths, target_lengths, blank, weights, loss, grad,
                path, samples):
    """:func:`ctc_batch` in the opt-in float32 compute (:func:`sample_float32`), ``grad``
    float32: a kernel of its own, so that the default compiles none of the float32 rows."""
    control = get_fp_control()
    set_fp_control(control | FLUSH_SUBNORMALS)  # subnormals are 0 here (primitives)
    for i in range(samples.shape[0]):
        batch_sample(logits, targets, input_lengths, target_lengths, blank, weights, loss,
                     grad, path, samples[i], samples[i], sample_float32)
    set_fp_control(control)


# (compute dtype, gradient dtype) -> kernel
KERNELS = {("float64", "float64"): ctc_batch, ("float64", "float32"): ctc_batch_rounded,
           ("float32", "float32"): ctc_batch32}
