"""The small pieces of CTC math, one implementation each, shared by every part of ctcbench.

Shape letters as in :mod:`ctcbench.core.problem`: ``T`` frames, ``N`` batch, ``C`` classes
(blank included), ``L`` padded target width.

  * normalisation: :func:`logsumexp`, :func:`log_softmax`;
  * the many-to-one map ``B``: :func:`collapse` (merge repeats, drop blanks), and
    :func:`emission_frames`, the frames where ``B`` emits a label;
  * what a target needs: :func:`adjacent_repeats`, :func:`min_frames`, :func:`feasible`,
    and its shortest alignment, :func:`minimal_path`;
  * decoding and scoring: :func:`greedy_decode` (best path, then ``B``), :func:`edit_distance`.

Targets are padded ``(N, L)`` with ``target_lengths (N,)``; entries past a sample's length
are never read. The per-target helpers also take one label sequence ``(L,)`` without lengths
and then return a plain ``int``.
"""
from __future__ import annotations

import numpy as np


# -- normalisation ------------------------------------------------------------------------------
def _finite_max(x: np.ndarray, axis: int) -> np.ndarray:
    """The max along ``axis`` (kept), 0 where it is not finite: a row of ``-inf`` (or one
    holding ``+inf``/NaN) must not turn ``x - max`` into NaN on its own."""
    m = np.max(x, axis=axis, keepdims=True)
    return np.where(np.isfinite(m), m, 0.0)


def logsumexp(x, *, axis: int = -1) -> np.ndarray:
    """``log(sum(exp(x)))`` along ``axis`` (removed), computed shifted by the max.

    ``x (..., C)`` -> ``(...)`` float64. A row of ``-inf`` gives ``-inf`` (no warning).
    """
    x = np.asarray(x, dtype=np.float64)
    m = _finite_max(x, axis)
    with np.errstate(divide="ignore"):  # log(0) for a row of -inf
        out = m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))
    return np.squeeze(out, axis=axis)


def log_softmax(x, *, axis: int = -1) -> np.ndarray:
    """``x - logsumexp(x)`` along ``axis``: ``x (..., C)`` scores -> ``(..., C)`` float64 log-probs.

    Computed as ``(x - max) - log(sum(exp(x - max)))``; rows that are not finite give NaN
    (``-inf - -inf``) rather than a warning, so callers can mask them.
    """
    x = np.asarray(x, dtype=np.float64)
    shifted = x - _finite_max(x, axis)  # (..., C), max 0 on finite rows
    with np.errstate(divide="ignore", invalid="ignore"):  # rows of -inf: log(0), -inf - -inf
        return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


# -- the many-to-one map B -----------------------------------------------------------------------
def emission_frames(path, *, blank: int = 0) -> list[int]:
    """Frames ``t`` of a class path ``(T,)`` where ``B`` emits a label: ``path[t]`` is not the
    blank and differs from ``path[t - 1]``."""
    out, prev = [], None
    for t, k in enumerate(path):
        if k != prev and k != blank:
            out.append(t)
        prev = k
    return out


def collapse(path, *, blank: int = 0) -> tuple[int, ...]:
    """Merge repeats, then drop blanks: the CTC many-to-one map ``B`` on a path ``(T,)``
    (a sequence that can be indexed: list, tuple, 1-D array)."""
    return tuple(int(path[t]) for t in emission_frames(path, blank=blank))


def paths_collapsing_to(T: int, C: int, target, *, blank: int = 0,
                        chunk: int = 1 << 18) -> np.ndarray:
    """Every class path ``(P, T)`` int64 of ``T`` frames over ``C`` classes that ``B`` maps to
    ``target``, in ``itertools.product`` order: :func:`collapse`'s rule on all ``C**T`` paths
    at once, ``chunk`` paths at a time (the brute-force oracle's enumeration)."""
    target = np.asarray(target, dtype=np.int64).reshape(-1)  # (L,)
    L, found = len(target), []
    place = C ** np.arange(T - 1, -1, -1, dtype=np.int64)  # (T,) frame 0 varies slowest
    for start in range(0, C ** T, chunk):
        index = np.arange(start, min(start + chunk, C ** T), dtype=np.int64)  # (P,)
        paths = index[:, None] // place[None, :] % C  # (P, T)
        emits = paths != blank  # (P, T): a label that differs from the frame before
        emits[:, 1:] &= paths[:, 1:] != paths[:, :-1]
        ok = emits.sum(axis=1) == L  # (P,)
        labels = paths[ok][emits[ok]].reshape(int(ok.sum()), L)  # (P_ok, L), in frame order
        ok[ok] = (labels == target[None, :]).all(axis=1)
        found.append(paths[ok])
    return np.concatenate(found) if found else np.zeros((0, T), dtype=np.int64)


# -- what a target needs -------------------------------------------------------------------------
def _batch(targets, target_lengths) -> tuple[np.ndarray, np.ndarray, bool]:
    """``(N, L)`` int64 targets and ``(N,)`` lengths; one sequence ``(L,)`` becomes ``N = 1``."""
    targets = np.asarray(targets, dtype=np.int64)
    single = target_lengths is None
    if single:
        if targets.ndim != 1:
            raise ValueError(f"targets: expected one sequence (L,) when target_lengths is not "
                             f"given, got shape {targets.shape}")
        targets = targets[None]  # (1, L)
        target_lengths = [targets.shape[1]]
    if targets.ndim != 2:
        raise ValueError(f"targets: expected a padded (N, L) array, got shape {targets.shape}")
    return targets, np.asarray(target_lengths, dtype=np.int64), single


def adjacent_repeats(targets, target_lengths=None):
    """Adjacent equal labels per target: each needs a blank between them.

    ``targets (N, L)`` padded with ``target_lengths (N,)`` -> ``(N,)`` int64; or one
    sequence ``(L,)`` -> int.
    """
    t, lengths, single = _batch(targets, target_lengths)
    inside = np.arange(1, t.shape[1])[None] < lengths[:, None]  # (N, L - 1) pairs in the target
    same = (t[:, 1:] == t[:, :-1]) & inside  # (N, L - 1)
    out = same.sum(axis=1).astype(np.int64)  # (N,)
    return int(out[0]) if single else out


def min_frames(targets, target_lengths=None):
    """Frames a target needs: one per label plus a blank between adjacent repeats.

    ``targets (N, L)`` padded with ``target_lengths (N,)`` (``<= L``) -> ``(N,)`` int64; or
    one sequence ``(L,)`` -> int.
    """
    t, lengths, single = _batch(targets, target_lengths)
    out = lengths + adjacent_repeats(t, lengths)  # (N,)
    return int(out[0]) if single else out


def feasible(targets, input_lengths, target_lengths) -> np.ndarray:
    """``(N,)`` bool: the target fits its frames, ``input_lengths >= min_frames``.

    ``targets (N, L)`` padded, ``input_lengths (N,)``, ``target_lengths (N,)`` (``<= L``).
    An infeasible target has no alignment: its loss is ``+inf``.
    """
    return np.asarray(input_lengths) >= min_frames(targets, target_lengths)


def minimal_path(target, *, blank: int = 0) -> list[int]:
    """The shortest alignment of one target ``(L,)``: its labels with a blank between adjacent
    repeats, ``min_frames(target)`` long; the only path to ``target`` in that many frames."""
    path, prev = [], None
    for k in target:
        if k == prev:
            path.append(blank)
        path.append(int(k))
        prev = k
    return path


# -- decoding and scoring -------------------------------------------------------------------------
def greedy_decode(scores, lengths, *, blank: int = 0) -> list[tuple[int, ...]]:
    """Best path decoding: argmax per frame, then ``B``.

    ``scores (T, N, C)`` log-probs (or anything with the same argmax: logits, probs),
    ``lengths (N,)`` valid frames per sample -> one label tuple per sample.
    """
    best = np.asarray(scores).argmax(-1)  # (T, N)
    return [collapse(best[: int(lengths[n]), n], blank=blank) for n in range(best.shape[1])]


def edit_distance(a, b) -> int:
    """Levenshtein distance between two sequences (insertions, deletions, substitutions)."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]
