"""Checkpointed forward-backward: the reference for problems whose ``(T, N, S)`` tables do not fit.

The full-table path (:mod:`ctcbench.core.reference`) keeps alpha, beta and the posteriors of
every frame: several ``(T, N, S)`` float64 tables, 3.2 GB each at T = 100000, N = 4, L = 500.
Here alpha is kept only every ``K`` frames (``K = ceil(sqrt(T))``): a ``(ceil(T / K), N, S + 2)``
checkpoint table. The backward pass walks the segments ``[t0, t0 + K)`` from the last to the
first, recomputes alpha inside the segment from its checkpoint, runs beta backwards through it
and hands the segment's state posteriors ``(K, N, S)`` to a callback, which scatters them onto
the class posteriors or the gradient. Memory is ``O((T / K + K) N S)``; alpha is computed
twice, so time is about 1.5 times one forward and one backward pass.

Both recursions are those of :mod:`ctcbench.core.reference`, every row normalised each frame
(the log of its sum is added up), in one of two arithmetics that share the code:
  * probability space (multiply-add), used first for every sample;
  * log space (``logaddexp``), redone for the samples where probability space could have
    lost mass to underflow: a row sum or a frame's ``sum_s alpha * beta`` below ``SAFE_FLOOR``.
The posterior of each frame is ``alpha * beta`` divided by its own sum over states, so every
valid frame of a sample with a finite loss sums to 1 up to rounding.
"""
from __future__ import annotations

import math

import numpy as np

from ctcbench.core.ctcmath import feasible, logsumexp
from ctcbench.core.extended import end_states, extended_labels, gather_states, scatter_states

SAFE_FLOOR = 1e-250  # below this, a probability-space quantity may have lost mass to underflow


class _Prob:
    """Probability space: ``plus`` adds, ``times`` multiplies."""

    zero, one = 0.0, 1.0
    plus, times = staticmethod(np.add), staticmethod(np.multiply)

    @staticmethod
    def normalise(row: np.ndarray) -> np.ndarray:
        """Scale each row of ``row (N, W)`` to sum 1 in place; return ``(N,)`` the log sums."""
        c = row.sum(axis=1)  # (N,)
        row *= (1.0 / np.maximum(c, 1e-300))[:, None]  # a zero row stays zero
        with np.errstate(divide="ignore"):
            return np.log(c)

    @staticmethod
    def posterior(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``a, b (..., S)`` -> posterior ``(..., S)`` normalised over states, and ``(...)``
        the log of each row's mass ``sum_s a * b``."""
        ab = a * b  # (..., S)
        mass = ab.sum(axis=-1)  # (...)
        ab /= np.where(mass > 0, mass, 1.0)[..., None]  # a quotient <= 1, even for subnormals
        with np.errstate(divide="ignore"):
            return ab, np.log(mass)


class _Log:
    """Log space: ``plus`` is ``logaddexp``, ``times`` adds; ``-inf`` is probability 0."""

    zero, one = -np.inf, 0.0
    plus, times = staticmethod(np.logaddexp), staticmethod(np.add)

    @staticmethod
    def normalise(row: np.ndarray) -> np.ndarray:
        """Shift each row of ``row (N, W)`` to max 0 in place (keeps log alpha near 0, so its
        rounding stays ~eps); return ``(N,)`` the shifts (0 for a row of ``-inf``)."""
        m = row.max(axis=1)  # (N,)
        m = np.where(np.isfinite(m), m, 0.0)  # -inf - -inf would be NaN
        row -= m[:, None]
        return m

    @staticmethod
    def posterior(a: np.ndarray, b: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        post = normalised_exp(a + b)  # (..., S); a + b is never +inf, so never NaN
        return post, np.zeros(post.shape[:-1])


def normalised_exp(x: np.ndarray) -> np.ndarray:
    """``exp(x)`` divided by its sum over the last axis, rows of ``-inf`` giving 0. Shifted by
    the row max and divided, not ``exp(x - logsumexp(x))``: that carries the rounding of
    ``logsumexp``, ``eps * |max|``, into every row sum."""
    m = x.max(axis=-1, keepdims=True)  # (..., 1)
    out = np.exp(x - np.where(np.isfinite(m), m, 0.0))  # -inf - -inf would be NaN
    total = out.sum(axis=-1, keepdims=True)  # (..., 1), >= 1 unless the row is all -inf
    out /= np.where(total > 0, total, 1.0)
    return out


def segment_length(T: int) -> int:
    """Frames per segment, ``ceil(sqrt(T))``: checkpoints and one segment cost the same."""
    return max(1, math.isqrt(max(T - 1, 0)) + 1)


def checkpointed_forward_backward(emit_of, targets: np.ndarray, input_lengths: np.ndarray,
                                  target_lengths: np.ndarray, *, T: int, blank: int, log: bool,
                                  consume, segment: int | None = None):
    """Loss and state posteriors of every sample, with ``O((T / K + K) N S)`` memory.

    Args:
      emit_of: ``emit_of(t0, t1) -> (t1 - t0, N, S)`` emissions at the extended labels,
        probabilities (``log=False``) or log-probabilities (``log=True``). Called once per
        segment, last segment first; values on padded frames and states are never read.
      targets: ``(N, L)`` padded with ``blank`` past ``target_lengths``.
      consume: ``consume(t0, t1, post)`` receives ``post (t1 - t0, N, S)``, the state
        posteriors of frames ``[t0, t1)`` (zero on padded frames and for infeasible samples),
        after ``emit_of`` was last asked for frames ``>= t0``: it may overwrite the source
        of the emissions there.
      segment: frames per segment ``K``; default :func:`segment_length`.
    Returns:
      ``loss (N,)`` (``+inf`` where no path has probability > 0) and ``unsafe (N,)`` bool,
      samples whose probability-space results may have lost mass (always False in log space).
      Once every sample is unsafe, the remaining segments are not consumed.
    """
    ar = _Log if log else _Prob
    N, _ = targets.shape
    ext, valid, skip = extended_labels(targets, target_lengths, blank)
    S = ext.shape[1]
    K = segment or segment_length(T)
    ends = end_states(target_lengths, S)  # (N, S)
    fits = feasible(targets, input_lengths, target_lengths)  # (N,)
    last_t = input_lengths - 1  # (N,)
    has = (input_lengths > 0) & fits  # (N,) samples with at least one path
    finishing = {int(t): np.flatnonzero(last_t == t) for t in np.unique(last_t) if t >= 0}
    gate = np.where(skip, ar.one, ar.zero)  # (N, S) alpha: s-2 -> s allowed iff skip[s]
    gate_back = np.full((N, S), ar.zero)  # (N, S) beta: s+2 -> s allowed iff skip[s+2]
    gate_back[:, :-2] = gate[:, 2:]
    start = np.where(ends, ar.one, ar.zero)  # (N, S) beta at a sample's last frame
    if not log:
        start /= ends.sum(axis=1)[:, None]  # normalised, like every other row

    def emissions(t0: int, t1: int) -> np.ndarray:
        e = np.asarray(emit_of(t0, t1), dtype=np.float64)  # (t1 - t0, N, S)
        inside = (np.arange(t0, t1)[:, None] < input_lengths[None, :])[..., None] & valid[None]
        return np.where(inside, e, ar.zero)  # padded frames may hold NaN

    # Forward: alpha of every frame, kept every K frames; the loss at each sample's last frame.
    loss = np.where(target_lengths == 0, 0.0, np.inf)  # the answer for input_length 0
    n_seg = -(-T // K)
    ckpt = np.empty((n_seg, N, S + 2))  # alpha every K frames; state s at column s + 2
    row = np.full((N, S + 2), ar.zero)  # (N, S + 2) alpha, two zero states on the left
    tmp = np.empty((N, S))
    log_norm_a = np.zeros((T, N))  # (T, N) log of alpha's normaliser at each frame
    acc = np.zeros(N)  # (N,) log of the normalisers applied so far
    for k in range(n_seg):
        t0, t1 = k * K, min((k + 1) * K, T)
        e = emissions(t0, t1)  # (t1 - t0, N, S)
        for t in range(t0, t1):
            if t == 0:
                row[:, 2:4] = e[0, :, :2]  # paths start in states 0 and 1
            else:
                _alpha_step(ar, row, gate, e[t - t0], tmp)
            log_norm_a[t] = ar.normalise(row)
            acc += log_norm_a[t]
            if t % K == 0:
                ckpt[t // K] = row
            done = finishing.get(t)
            if done is not None:
                final = np.where(ends[done], row[done, 2:], ar.zero)  # (n, S)
                with np.errstate(divide="ignore"):
                    log_end = logsumexp(final, axis=1) if log else np.log(final.sum(axis=1))
                loss[done] = np.where(has[done], -(acc[done] + log_end), loss[done])

    # Backward, segment by segment: alpha again from its checkpoint, beta, posteriors.
    keep = has & np.isfinite(loss)  # (N,) samples with defined posteriors
    smallest = np.full(N, np.inf)  # (N,) log of the smallest norm * mass on a valid frame
    beta = np.full((N, S + 2), ar.zero)  # (N, S + 2) state s at column s, two zeros right
    nxt = np.full((N, S + 2), ar.zero)
    e_next = np.full((N, S), ar.zero)  # emissions of the frame after the segment
    for k in range(n_seg - 1, -1, -1):
        t0, t1 = k * K, min((k + 1) * K, T)
        e = emissions(t0, t1)  # (t1 - t0, N, S)
        alpha = np.empty((t1 - t0, N, S + 2))  # (t1 - t0, N, S + 2) alpha recomputed
        alpha[0] = ckpt[k]
        for t in range(t0 + 1, t1):
            alpha[t - t0] = alpha[t - t0 - 1]
            _alpha_step(ar, alpha[t - t0], gate, e[t - t0], tmp)
            ar.normalise(alpha[t - t0])
        betas = np.empty((t1 - t0, N, S))  # (t1 - t0, N, S) beta of the segment
        log_norm_b = np.zeros((t1 - t0, N))  # (t1 - t0, N) beta's normalisers; 0 at the ends
        for t in range(t1 - 1, t0 - 1, -1):
            if t < T - 1:
                ar.times(beta[:, :S], e_next, out=nxt[:, :S])
                ar.times(nxt[:, 2:], gate_back, out=tmp)
                ar.plus(tmp, nxt[:, 1:-1], out=tmp)
                ar.plus(tmp, nxt[:, :S], out=beta[:, :S])
                log_norm_b[t - t0] = ar.normalise(beta[:, :S])
            starting = finishing.get(t)
            if starting is not None:
                beta[starting, :S] = start[starting]
                log_norm_b[t - t0, starting] = 0.0  # exact: nothing underflowed
            betas[t - t0] = beta[:, :S]
            e_next = e[t - t0]
        post, log_mass = ar.posterior(alpha[:, :, 2:], betas)  # (t1 - t0, N, S), (t1 - t0, N)
        del alpha, betas, e
        in_use = np.arange(t0, t1)[:, None] <= last_t[None, :]  # (t1 - t0, N)
        # An entry that underflowed at frame t is off by ~1e-308 / norm in its normalised
        # row and by that / mass in Z: norm * mass >= SAFE_FLOOR bounds both recursions.
        worst = log_mass + np.minimum(log_norm_a[t0:t1], log_norm_b)  # (t1 - t0, N)
        smallest = np.minimum(smallest, np.where(in_use & has, worst, np.inf).min(axis=0))
        post[~(in_use & keep)] = 0.0
        consume(t0, t1, post)
        if not log and (smallest[has] < math.log(SAFE_FLOOR)).all() and has.any():
            break  # every sample will be redone in log space: the rest would be wasted
    unsafe = has & (smallest < math.log(SAFE_FLOOR)) if not log else np.zeros(N, dtype=bool)
    return loss, unsafe


def _alpha_step(ar, row: np.ndarray, gate: np.ndarray, e: np.ndarray, tmp: np.ndarray) -> None:
    """One frame of the forward recursion in place: ``row (N, S + 2)`` (state s at column
    s + 2, two zero states on the left) becomes the next frame's alpha, emissions ``e (N, S)``."""
    ar.times(row[:, :-2], gate, out=tmp)
    ar.plus(tmp, row[:, 1:-1], out=tmp)
    ar.plus(tmp, row[:, 2:], out=tmp)
    ar.times(tmp, e, out=row[:, 2:])


def class_posteriors(probs: np.ndarray, log_probs_of, targets: np.ndarray,
                     input_lengths: np.ndarray, target_lengths: np.ndarray, *, blank: int,
                     gradient: bool = False, segment: int | None = None):
    """The checkpointed forward-backward summed onto classes.

    Args:
      probs: ``(T, N, C)`` C-contiguous emission probabilities (read for every sample first).
      log_probs_of: ``log_probs_of(idx) -> (T, len(idx), C)`` log-probabilities of the samples
        ``idx`` that probability space could not do exactly; they are redone in log space.
      gradient: overwrite ``probs`` with ``probs - gamma`` (the gradient w.r.t. the logits
        when ``probs`` is the softmax; redone samples get ``exp(log_probs) - gamma``) instead
        of returning gamma in a new array.
    Returns:
      ``loss (N,)``, ``log_space (N,)`` bool (the samples redone in log space) and
      ``(T, N, C)``: gamma, the class posteriors, or ``probs`` itself with ``gradient``.
    """
    T, N, C = probs.shape
    ext, _, _ = extended_labels(targets, target_lengths, blank)
    out = probs if gradient else np.zeros((T, N, C))  # (T, N, C)
    loss, unsafe = checkpointed_forward_backward(
        lambda t0, t1: gather_states(probs[t0:t1], ext), targets, input_lengths, target_lengths,
        T=T, blank=blank, log=False, segment=segment,
        consume=lambda t0, t1, post: scatter_states(out[t0:t1], post, targets, blank=blank,
                                                    subtract=gradient))
    if unsafe.any():
        idx = np.flatnonzero(unsafe)
        lp = np.ascontiguousarray(log_probs_of(idx), dtype=np.float64)  # (T, n, C)
        redone = np.exp(lp) if gradient else np.zeros((T, len(idx), C))  # (T, n, C)
        loss[idx], _ = checkpointed_forward_backward(
            lambda t0, t1: gather_states(lp[t0:t1], ext[idx]), targets[idx], input_lengths[idx],
            target_lengths[idx], T=T, blank=blank, log=True, segment=segment,
            consume=lambda t0, t1, post: scatter_states(redone[t0:t1], post, targets[idx],
                                                        blank=blank, subtract=gradient))
        out[:, idx] = redone
    return loss, unsafe, out
