"""The extended label sequence of CTC and moving values between classes and its states.

Shape letters as in :mod:`ctcbench.core.problem`, plus ``S = 2L + 1`` extended states per
sample: blank, l1, blank, l2, ..., blank. A sample with ``target_length`` labels uses the
first ``2 * target_length + 1`` of them.
"""
from __future__ import annotations

import numpy as np

SCATTER_CHUNK = 1 << 20  # label states per chunk of the class scatter


def extended_labels(targets: np.ndarray, target_lengths: np.ndarray, blank: int):
    """``(N, S)`` blank-interleaved labels, ``(N, S)`` valid-state mask, ``(N, S)`` skip mask."""
    N, L = targets.shape
    S = 2 * L + 1
    ext = np.full((N, S), blank, dtype=np.int64)
    ext[:, 1::2] = targets
    valid = np.arange(S)[None, :] < (2 * target_lengths + 1)[:, None]  # (N, S)
    skip = np.zeros((N, S), dtype=bool)
    skip[:, 3::2] = targets[:, 1:] != targets[:, :-1]  # label state s may come from s - 2
    return ext, valid, skip & valid


def gather_states(x: np.ndarray, ext: np.ndarray) -> np.ndarray:
    """``x (T, N, C)`` read at each sample's extended labels ``ext (N, S)`` -> ``(T, N, S)``.

    One ``np.take`` over flat ``(n, class)`` columns, faster than the equivalent 3-D fancy
    index ``x[:, arange(N)[:, None], ext]`` (docs/bench.md)."""
    T, N, C = x.shape
    flat = (np.arange(N)[:, None] * C + ext).ravel()  # (N * S,)
    return np.take(np.ascontiguousarray(x).reshape(T, N * C), flat, axis=1).reshape(
        T, N, ext.shape[1])


def end_states(target_lengths: np.ndarray, S: int) -> np.ndarray:
    """``(N, S)`` bool: the final states ``S_n - 1`` and ``S_n - 2`` of each sample."""
    N = len(target_lengths)
    batch = np.arange(N)
    S_n = 2 * target_lengths + 1
    ends = np.zeros((N, S), dtype=bool)
    ends[batch, S_n - 1] = True
    ends[batch[S_n >= 2], (S_n - 2)[S_n >= 2]] = True
    return ends


def scatter_states(out: np.ndarray, state_post: np.ndarray, targets: np.ndarray, *, blank: int,
                   subtract: bool = False) -> None:
    """``out (T, N, C) += state_post (T, N, S)`` summed onto each state's class (``-=`` with
    ``subtract``). ``out`` must be C-contiguous.

    Blank states go to ``blank`` in one reduction; label states go to their labels with one
    unbuffered ``ufunc.at`` over flat indices, so repeated labels add up correctly.
    """
    T, N, S = state_post.shape
    C = out.shape[2]
    if not out.flags.c_contiguous:  # reshape(-1) would copy and the update would be lost
        raise ValueError(f"out: expected a C-contiguous array, got strides {out.strides}")
    blank_mass = state_post[:, :, 0::2].sum(axis=-1)  # (T, N)
    if subtract:
        out[:, :, blank] -= blank_mass
    else:
        out[:, :, blank] += blank_mass
    if S == 1:
        return
    ufunc = np.subtract if subtract else np.add
    flat_out = out.reshape(-1)
    step = max(1, SCATTER_CHUNK // (N * (S // 2)))  # frames per chunk: small temporaries
    for t0 in range(0, T, step):
        t = np.arange(t0, min(t0 + step, T))
        flat = (t[:, None, None] * N + np.arange(N)[None, :, None]) * C + targets[None]
        ufunc.at(flat_out, flat.ravel(), state_post[t0:t0 + step, :, 1::2].ravel())  # labels
