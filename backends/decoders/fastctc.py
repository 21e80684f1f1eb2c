"""Decoders ``fast-ctc-beam`` and ``fast-ctc-viterbi``: the ``fast-ctc-decode`` package (Rust).

``beam_search(network_output, alphabet, beam_size=5, beam_cut_threshold=0.0,
collapse_repeats=True)`` and ``viterbi_search(network_output, alphabet, qstring=False,
qscale=1.0, qbias=0.0, collapse_repeats=True)`` take one sample's probabilities
``(T, C)`` float32 (a softmax's output, not logarithms) with the blank first, and an
alphabet, one label per class (the blank's is never used); each returns the labelling as a
string and the frame of each label, and no score (score ``none``). ``viterbi_search`` is the
best path (a greedy decoder); ``collapse_repeats=True`` (the default of both) is CTC's map.

The adapter moves our blank to class 0, exponentiates, names each class by a distinct
character and reads the string back into our classes, one sample at a time.
"""
from __future__ import annotations

import numpy as np

from .._thirdparty import require
from .tf import check_beam


def blank_first(lp: np.ndarray, blank: int) -> tuple[np.ndarray, str, dict[str, int]]:
    """One sample's ``lp (T, C)`` as probabilities with our blank first, the alphabet that
    names those classes (distinct characters from "A", no surrogates: Rust takes UTF-8), and
    each character's class of ours."""
    C = lp.shape[1]
    order = [blank] + [c for c in range(C) if c != blank]
    alphabet = "".join(chr(65 + c + (0x800 if 65 + c >= 0xD800 else 0)) for c in order)
    probs = np.ascontiguousarray(np.exp(lp[:, order]), dtype=np.float32)
    return probs, alphabet, {ch: c for ch, c in zip(alphabet, order)}


class FastCTCBeamDecoder:
    """fast_ctc_decode.beam_search with beam_size=beam and its other defaults."""

    name = "fast-ctc-beam"
    search = "beam"
    score = "none"
    exact_beam = True  # the most probable labelling at beam_size=prefix_count(T, C)
    blank = "first"
    dtype = "float32"  # what it computes in
    packages = ("fast_ctc_decode",)
    conventions = ("probabilities, blank first (moved there), an alphabet of one character "
                   "per class; collapse_repeats=True: CTC's map; no score")

    def __init__(self):
        require(("fast_ctc_decode",), extra="decoders")

    def decode(self, log_probs, lengths, *, blank: int, beam: int):
        import fast_ctc_decode
        out = []
        for n, n_frames in enumerate(int(x) for x in lengths):
            probs, alphabet, back = blank_first(log_probs[:n_frames, n], blank)
            text, _ = self._call(fast_ctc_decode, probs, alphabet, beam)
            out.append([[[back[ch] for ch in text], None]])
        return out

    @staticmethod
    def _call(module, probs, alphabet, beam):
        check_beam(beam)
        return module.beam_search(probs, alphabet, beam_size=beam)


class FastCTCViterbiDecoder(FastCTCBeamDecoder):
    """fast_ctc_decode.viterbi_search: the argmax of each frame, then CTC's map."""

    name = "fast-ctc-viterbi"
    search = "greedy"
    exact_beam = False
    conventions = ("probabilities, blank first (moved there), an alphabet of one character "
                   "per class; argmax per frame, collapse_repeats=True: CTC's map; no score")

    @staticmethod
    def _call(module, probs, alphabet, beam):
        return module.viterbi_search(probs, alphabet)
