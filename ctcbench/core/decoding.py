"""Exact answers for decoders and aligners: what every decoder's output must agree with.

Independent of any decoder (they share only the map ``B``, :func:`collapse`):
  * :func:`labelling_logprobs`: every labelling's log-probability, the log of the sum over
    its paths, by enumerating all C^T paths (tiny T and C only);
  * :func:`labelling_logprob`: one labelling's log-probability at any size, minus its CTC loss
    from the float64 reference (:mod:`ctcbench.core.reference`);
  * :func:`best_path`: a target's most probable path and its log-probability, by a max-plus
    recursion over its extended labels (any T): what a forced aligner must find (the
    ``viterbi`` aligner is this function behind the decoder contract); :func:`best_path_score`
    its log-probability alone;
  * :func:`prefix_count`: how many labellings a beam must hold to be exact (the prefix beam
    search itself: :mod:`ctcbench.core.beam`).
"""
from __future__ import annotations

import itertools

import numpy as np

from ctcbench.core.ctcmath import collapse
from ctcbench.core.extended import extended_labels
from ctcbench.core.reference import forward_backward

MAX_PATHS = 2_000_000  # brute force above this many paths is refused (memory ~ 8 T bytes each)


def labelling_logprobs(lp: np.ndarray, *, blank: int = 0,
                       max_paths: int = MAX_PATHS) -> dict[tuple[int, ...], float]:
    """``{labelling: log P(labelling)}`` over every labelling with a path, by brute force.

    ``lp (T, C)``: one sample's normalised log-probabilities (its valid frames only).
    """
    T, C = lp.shape
    if C ** T > max_paths:
        raise ValueError(f"log_probs: expected C**T <= {max_paths} for brute force, "
                         f"got {C}**{T}")
    if T == 0:
        return {(): 0.0}
    paths = np.array(list(itertools.product(range(C), repeat=T)), dtype=np.int64)  # (P, T)
    path_lp = lp[np.arange(T)[None, :], paths].sum(axis=1)  # (P,)
    out: dict[tuple[int, ...], list[float]] = {}
    for path, score in zip(paths.tolist(), path_lp.tolist()):
        out.setdefault(collapse(path, blank=blank), []).append(score)
    return {k: float(np.logaddexp.reduce(v)) for k, v in out.items()
            if np.isfinite(np.max(v))}


def most_probable(lp: np.ndarray, *, blank: int = 0,
                  tie_tol: float = 1e-12) -> tuple[set[tuple[int, ...]], float]:
    """The most probable labellings (all within ``tie_tol`` of the best) and their log-prob."""
    probs = labelling_logprobs(lp, blank=blank)
    best = max(probs.values())
    return {k for k, v in probs.items() if v >= best - tie_tol}, best


def labelling_logprob(lp: np.ndarray, labellings, *, blank: int = 0) -> np.ndarray:
    """``(K,)`` log P of each of ``labellings`` under one sample's ``lp (T, C)``: minus the
    reference's CTC loss (``-inf`` where no path collapses to it)."""
    labellings = [tuple(int(k) for k in lab) for lab in labellings]
    K, T = len(labellings), lp.shape[0]
    if K == 0:
        return np.zeros(0)
    L = max(1, max(len(lab) for lab in labellings))
    targets = np.full((K, L), 1 if blank == 0 else 0, dtype=np.int64)  # (K, L) padded
    for i, lab in enumerate(labellings):
        targets[i, :len(lab)] = lab
    lengths = np.array([len(lab) for lab in labellings], dtype=np.int64)
    batch = np.repeat(lp[:, None, :], K, axis=1)  # (T, K, C): one copy per labelling
    loss = forward_backward(batch, targets, np.full(K, T), lengths, blank=blank).loss
    return -np.asarray(loss, dtype=np.float64)


def best_path(lp: np.ndarray, target, *,
              blank: int = 0) -> tuple[tuple[int, ...] | None, float]:
    """``(path, score)``: a path of ``B^-1(target)`` through one sample's ``lp (T, C)`` with
    the highest ``sum_t lp[t, path_t]``, as ``T`` classes (blanks included), and that sum;
    ``(None, score)`` where the score is not finite: ``-inf`` where no path of ``T`` frames
    spells ``target``. Ties: staying in a state before moving one state, before skipping a
    blank; ending on the last label before the trailing blank."""
    target = np.asarray(list(target), dtype=np.int64).reshape(1, -1)
    ext, _, _ = extended_labels(target, np.array([target.shape[1]]), blank)
    ext = ext[0]  # (S,) blank, l1, blank, ..., blank
    T, S = lp.shape[0], len(ext)
    if T == 0:
        return ((), 0.0) if S == 1 else (None, -np.inf)
    skip = np.zeros(S, dtype=bool)  # s may be entered from s - 2: a label unlike the one before
    skip[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
    score = np.full(S, -np.inf)  # (S,) the best path ending in each state
    score[:2] = lp[0, ext[:2]]
    moved = np.zeros((T, S), dtype=np.int8)  # (T, S) states moved to enter s at t: 0, 1 or 2
    for t in range(1, T):
        options = np.full((3, S), -np.inf)  # (3, S) from s, s - 1, s - 2
        options[0] = score
        options[1, 1:] = score[:-1]
        options[2, 2:] = np.where(skip[2:], score[:-2], -np.inf)
        moved[t] = options.argmax(0)  # the first maximum: the fewest states moved
        score = options[moved[t], np.arange(S)] + lp[t, ext]
    end = S - 1 if S == 1 else S - 2 + int(np.argmax(score[-2:]))  # (a NaN wins, as in max)
    best = float(score[end])
    if not np.isfinite(best):
        return None, best
    states = [end]
    for t in range(T - 1, 0, -1):
        states.append(states[-1] - int(moved[t, states[-1]]))
    return tuple(int(ext[s]) for s in reversed(states)), best


def best_path_score(lp: np.ndarray, target, *, blank: int = 0) -> float:
    """max over the paths ``B^-1(target)`` of ``sum_t lp[t, path_t]`` (``-inf``: none)."""
    return best_path(lp, target, blank=blank)[1]


def path_score(lp: np.ndarray, path) -> float:
    """``sum_t lp[t, path_t]``: one path's log-probability."""
    path = np.asarray(path, dtype=np.int64)
    return float(lp[np.arange(len(path)), path].sum())


def prefix_count(T: int, C: int) -> int:
    """Labellings of length <= T over ``C - 1`` labels: a beam this wide never prunes."""
    return sum((C - 1) ** n for n in range(T + 1))
