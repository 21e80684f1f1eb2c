"""ctcbench's own decoders and aligner, float64: greedy, a prefix beam search, Viterbi alignment.

The contract is ``ctcbench.runtime.decoders``'s; the algorithms are the core's, each written
once: the prefix beam search is :func:`ctcbench.core.beam.prefix_beam_search` (exact at a beam
of ``prefix_count(T, C)``, checked by brute force in tests/core), the alignment
:func:`ctcbench.core.decoding.best_path`.
"""
from __future__ import annotations

from ctcbench.core.beam import prefix_beam_search
from ctcbench.core.ctcmath import collapse
from ctcbench.core.decoding import best_path
from ctcbench.runtime.decoders import check_align_inputs, check_decode_inputs


class GreedyDecoder:
    """Best path: the argmax of each frame (a tie goes to the lowest class), then ``B``."""

    name = "greedy"
    search = "greedy"
    score = "path"
    ties = "first"
    conventions = "argmax per frame, repeats merged, then blanks removed; score: best path"

    def decode(self, log_probs, lengths, *, blank: int, beam: int = 1):
        check_decode_inputs(log_probs, lengths, blank=blank)
        best = log_probs.argmax(-1)  # (T, N)
        top = log_probs.max(-1)  # (T, N)
        return [[[list(collapse(best[:n_frames, n], blank=blank)),
                  float(top[:n_frames, n].sum())]]
                for n, n_frames in enumerate(int(x) for x in lengths)]


class PrefixBeamDecoder:
    """Prefix beam search in log space; exact at a beam of ``prefix_count(T, C)``."""

    name = "beam"
    search = "beam"
    score = "labelling"
    exact_beam = True
    conventions = ("prefix beam search: a label repeated without a blank between is one label; "
                   "score: log P(labels), the sum over the paths the beam kept")

    def decode(self, log_probs, lengths, *, blank: int, beam: int):
        check_decode_inputs(log_probs, lengths, blank=blank, beam=beam)
        return [[[list(labels), score] for labels, score in
                 prefix_beam_search(log_probs[:int(n_frames), n], beam=beam, blank=blank)]
                for n, n_frames in enumerate(lengths)]


class ViterbiAligner:
    """The most probable path of the target (max-plus over its extended labels)."""

    name = "viterbi"
    role = "aligner"
    score = "path"
    conventions = "Viterbi over blank, l1, blank, ..., blank; score: the path's log-probability"

    def align(self, log_probs, target, *, blank: int):
        check_align_inputs(log_probs, target, blank=blank)
        path, score = best_path(log_probs, target, blank=blank)
        if path is None or not len(log_probs):  # no frame: no path, even of no label
            raise ValueError(f"target: expected one with a path of {len(log_probs)} frames, "
                             f"got {[int(k) for k in target]}")
        return [list(path), score]
