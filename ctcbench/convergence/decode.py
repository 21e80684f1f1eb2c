"""Decoding for convergence's scores, and the error rates they are scored with.

Greedy (best path) decoding and the edit distance live in :mod:`ctcbench.core.ctcmath`
(``greedy_decode``, ``edit_distance``), the prefix beam search in :mod:`ctcbench.core.beam`;
``beam_decode`` runs it on a batch and keeps each sample's best labelling.
"""
from __future__ import annotations

import numpy as np

from ctcbench.core.beam import prefix_beam_search
from ctcbench.core.ctcmath import edit_distance
from ctcbench.errors import expect


# Widest beam accepted: the prefixes kept grow with it (up to C**T), each with Python work
# per frame; wider beams change nothing on these models.
MAX_BEAM = 256


def beam_decode(log_probs: np.ndarray, lengths, *, beam: int = 8, blank: int = 0,
                ) -> list[tuple[int, ...]]:
    """``log_probs (T, N, C)`` -> one label tuple per sample, its prefix beam search's best
    (empty where no prefix keeps a finite probability: a model whose outputs are NaN)."""
    expect(1 <= beam <= MAX_BEAM, "beam", f"an integer in [1, {MAX_BEAM}]", beam)
    best = []
    for n in range(log_probs.shape[1]):
        hyps = prefix_beam_search(log_probs[: int(lengths[n]), n], beam=beam, blank=blank)
        best.append(hyps[0][0] if hyps else ())
    return best


def error_rates(predictions, references) -> tuple[float, float]:
    """(character error rate = total edits / total reference length, sequence accuracy)."""
    edits = sum(edit_distance(p, r) for p, r in zip(predictions, references))
    chars = sum(len(r) for r in references)
    exact = sum(tuple(p) == tuple(r) for p, r in zip(predictions, references))
    return edits / max(chars, 1), exact / max(len(references), 1)
