"""CTC decoders over log-probabilities, and the error rates they are scored with.

Greedy (best path) decoding and the edit distance live in :mod:`ctcbench.core.ctcmath`
(``greedy_decode``, ``edit_distance``).
``prefix_beam_search``: the CTC prefix beam search (Hannun et al. 2014, without a language
model), tracking for each prefix the probability of ending in blank and in non-blank. With
a beam as wide as the number of prefixes it is exact: it returns the labelling with the
highest total probability summed over all its paths.
"""
from __future__ import annotations

import numpy as np

from ctcbench.core.ctcmath import edit_distance


# Widest beam accepted: the number of prefixes kept grows with it (up to C**T), and each
# costs a Python loop over C classes per frame; wider beams change nothing on these models.
MAX_BEAM = 256


def prefix_beam_search(log_probs: np.ndarray, *, beam: int = 8, blank: int = 0,
                       ) -> tuple[tuple[int, ...], float]:
    """One sample's ``log_probs (T, C)`` -> (best labelling, its log-probability)."""
    lp = np.asarray(log_probs, dtype=np.float64)
    if not 1 <= beam <= MAX_BEAM:
        raise ValueError(f"beam: expected an integer in [1, {MAX_BEAM}], got {beam}")
    T, C = lp.shape
    # prefix -> (log P(prefix, ends in blank), log P(prefix, ends in non-blank))
    beams: dict[tuple[int, ...], tuple[float, float]] = {(): (0.0, -np.inf)}
    for t in range(T):
        nxt: dict[tuple[int, ...], list[float]] = {}

        def add(prefix, pb, pnb):
            cur = nxt.setdefault(prefix, [-np.inf, -np.inf])
            cur[0] = np.logaddexp(cur[0], pb)
            cur[1] = np.logaddexp(cur[1], pnb)

        for prefix, (pb, pnb) in beams.items():
            total = np.logaddexp(pb, pnb)
            add(prefix, total + lp[t, blank], -np.inf)  # emit blank
            for c in range(C):
                if c == blank:
                    continue
                if prefix and prefix[-1] == c:
                    add(prefix, -np.inf, pnb + lp[t, c])  # repeat merges into the same label
                    add(prefix + (c,), -np.inf, pb + lp[t, c])  # new label after a blank
                else:
                    add(prefix + (c,), -np.inf, total + lp[t, c])
        ranked = sorted(nxt.items(), key=lambda kv: -np.logaddexp(*kv[1]))
        beams = {k: (v[0], v[1]) for k, v in ranked[:beam]}
    best, (pb, pnb) = max(beams.items(), key=lambda kv: np.logaddexp(*kv[1]))
    return best, float(np.logaddexp(pb, pnb))


def beam_decode(log_probs: np.ndarray, lengths, *, beam: int = 8, blank: int = 0,
                ) -> list[tuple[int, ...]]:
    """``log_probs (T, N, C)`` -> one label tuple per sample, by prefix beam search."""
    return [prefix_beam_search(log_probs[: int(lengths[n]), n], beam=beam, blank=blank)[0]
            for n in range(log_probs.shape[1])]


def error_rates(predictions, references) -> tuple[float, float]:
    """(character error rate = total edits / total reference length, sequence accuracy)."""
    edits = sum(edit_distance(p, r) for p, r in zip(predictions, references))
    chars = sum(len(r) for r in references)
    exact = sum(tuple(p) == tuple(r) for p, r in zip(predictions, references))
    return edits / max(chars, 1), exact / max(len(references), 1)
