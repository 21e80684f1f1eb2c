"""Independent oracles: answers computed without any forward-backward recursion.

Each one is a different algorithm from the backends, so agreement means something (they
share only :func:`log_softmax` and the map ``B`` (:func:`paths_collapsing_to`) with the rest, from
:mod:`ctcbench.core.ctcmath`):
  * brute force: enumerate all C^T paths, collapse, sum (tiny T and C only; exact);
  * closed forms: a single valid alignment, uniform predictions, an empty target.
"""
from __future__ import annotations

import math

import numpy as np

from ctcbench.core.ctcmath import adjacent_repeats, log_softmax, paths_collapsing_to


def brute_force(logits: np.ndarray, target, *, blank: int = 0,
                max_paths: int = 5_000_000) -> tuple[float, np.ndarray]:
    """Loss and gradient w.r.t. logits for ONE sample by enumerating every path.

    Args:
      logits: ``(T, C)`` unnormalised scores of the sample's valid frames; ``-inf`` is
        probability 0.
      target: the label sequence (no blanks).
    Returns:
      ``(loss, grad)`` with ``grad (T, C)``; ``(inf, zeros)`` when no path collapses to target.
    """
    lp = log_softmax(logits)  # (T, C)
    T, C = lp.shape
    if C ** T > max_paths:
        raise ValueError(f"logits: expected C**T <= {max_paths} for brute force, got {C}**{T}")
    target = tuple(int(k) for k in target)
    if T == 0:  # only the empty path, which collapses to the empty target
        return (0.0 if not target else math.inf), np.zeros((0, C))
    paths = paths_collapsing_to(T, C, target, blank=blank)  # (P, T)
    if len(paths) == 0:
        return math.inf, np.zeros((T, C))
    path_lp = lp[np.arange(T)[None, :], paths].sum(axis=1)  # (P,), -inf through a zero
    log_z = np.logaddexp.reduce(path_lp)
    if log_z == -np.inf:  # every valid path has probability 0 (-inf logits)
        return math.inf, np.zeros((T, C))
    weight = np.exp(path_lp - log_z)  # (P,) posterior of each path
    gamma = np.zeros((T, C))  # P(frame t emits c | target)
    for t in range(T):
        np.add.at(gamma[t], paths[:, t], weight)
    return float(-log_z), np.exp(lp) - gamma


def uniform_loss(T: int, C: int, target) -> float:
    """Loss under uniform predictions: T log C - log binom(T + L - r, 2L).

    Every path has probability C^-T, and the number of paths that collapse to a target of
    length L with r adjacent repeats is binom(T + L - r, 2L).
    """
    L, r = len(target), adjacent_repeats(target)
    if T < L + r:
        return math.inf
    n, k = T + L - r, 2 * L
    log_binom = math.lgamma(n + 1) - math.lgamma(k + 1) - math.lgamma(n - k + 1)
    return T * math.log(C) - log_binom


def path_loss(logits: np.ndarray, path) -> float:
    """-sum_t log p_t(path_t): the loss when ``path`` is the only valid alignment."""
    lp = log_softmax(logits)
    return float(-lp[np.arange(len(path)), list(path)].sum())


def empty_target_loss(logits: np.ndarray, *, blank: int = 0) -> float:
    """-sum_t log p_t(blank): the only path to an empty target is all-blank."""
    return float(-log_softmax(logits)[:, blank].sum())
