"""The CTC prefix beam search, without a language model: one sample, float64, in log space.

Hannun et al., "First-Pass Large Vocabulary Continuous Speech Recognition using
Bi-Directional Recurrent DNNs", 2014, section 3: each prefix keeps the log-probability of its
paths ending in a blank and in a label. A beam of ``prefix_count(T, C)``
(:mod:`ctcbench.core.decoding`) never prunes, and each score is then the labelling's exact
log-probability; a narrower beam sums only the paths it kept. Used by the ``beam`` decoder
(``backends/decoders/own.py``) and by convergence's evaluation (``convergence/decode.py``).
"""
from __future__ import annotations

import numpy as np

from ctcbench.errors import expect


def prefix_beam_search(log_probs: np.ndarray, *, beam: int, blank: int = 0,
                       ) -> list[tuple[tuple[int, ...], float]]:
    """One sample's ``log_probs (T, C)`` (normalised, its valid frames only) -> at most
    ``beam`` hypotheses ``(labels, log P)``, best first; ``[]`` when no prefix keeps a
    finite probability (a frame of ``-inf`` or NaN only).

    Per frame the beam keeps the ``beam`` best of: every prefix kept (its blank and repeat
    paths, and an extension of another prefix that spells it), and every extension by one
    label. A prefix whose probability is 0 (``-inf``) or NaN is never kept. Ties: a kept
    prefix before an extension, earlier prefixes before later ones, lower labels first; the
    final hypotheses are ordered by score, then by labels.
    """
    lp = np.asarray(log_probs, dtype=np.float64)
    expect(lp.ndim == 2, "log_probs", "one sample's (T, C) array", f"shape {lp.shape}")
    C = lp.shape[1]
    expect(0 <= blank < C, "blank", f"a class index in [0, {C})", repr(blank))
    expect(beam >= 1, "beam", "a positive integer", repr(beam))
    with np.errstate(invalid="ignore"):  # a NaN frame gives NaN candidates, dropped below
        return _search(lp, beam, blank)


def _search(lp: np.ndarray, beam: int, blank: int) -> list[tuple[tuple[int, ...], float]]:
    """:func:`prefix_beam_search` on checked arguments."""
    C = lp.shape[1]
    prefixes: list[tuple[int, ...]] = [()]
    p_blank, p_label = np.array([0.0]), np.array([-np.inf])  # (B,) log P, ending in blank / label
    for frame in lp:  # frame (C,)
        if not prefixes:
            return []
        total = np.logaddexp(p_blank, p_label)  # (B,)
        last = np.array([p[-1] if p else -1 for p in prefixes])  # (B,)
        # extend prefix b by class c: after a label c itself, only its blank-ending paths count
        grow = np.where(np.arange(C)[None, :] == last[:, None], p_blank[:, None],
                        total[:, None]) + frame[None, :]  # (B, C)
        grow[:, blank] = -np.inf
        stay_blank = total + frame[blank]  # (B,) a blank keeps the prefix
        stay_label = np.where(last >= 0, p_label + frame[np.maximum(last, 0)], -np.inf)  # (B,)
        index = {p: b for b, p in enumerate(prefixes)}
        for b, p in enumerate(prefixes):  # an extension that is already a prefix merges into it
            if p and p[:-1] in index:
                parent = index[p[:-1]]
                stay_label[b] = np.logaddexp(stay_label[b], grow[parent, p[-1]])
                grow[parent, p[-1]] = -np.inf
        stay = np.logaddexp(stay_blank, stay_label)  # (B,)
        kept = np.flatnonzero(np.isfinite(stay))  # candidates: kept prefixes, then extensions
        cells = np.flatnonzero(np.isfinite(grow).ravel())  # (b, c) flattened, in that order
        scores = np.concatenate([stay[kept], grow.ravel()[cells]])
        chosen = np.argsort(-scores, kind="stable")[:beam]
        new_prefixes, new_blank, new_label = [], [], []
        for i in chosen:
            if i < len(kept):
                b = kept[i]
                new_prefixes.append(prefixes[b])
                new_blank.append(stay_blank[b])
                new_label.append(stay_label[b])
            else:
                b, c = divmod(int(cells[i - len(kept)]), C)
                new_prefixes.append(prefixes[b] + (c,))
                new_blank.append(-np.inf)
                new_label.append(grow[b, c])
        prefixes = new_prefixes
        p_blank, p_label = np.array(new_blank), np.array(new_label)
    total = np.logaddexp(p_blank, p_label)
    order = sorted(range(len(prefixes)), key=lambda b: (-total[b], prefixes[b]))
    return [(prefixes[b], float(total[b])) for b in order]
