"""Decoders ``flashlight`` and ``flashlight-logadd``: flashlight-text's lexicon-free beam search.

``flashlight.lib.text.decoder.LexiconFreeDecoder(options, lm, sil_token_idx,
blank_token_idx, transitions)`` decodes one sample's emissions ``(T, C)`` float32, row-major,
given by address (``decode(ptr, T, C)``), into every hypothesis left in its beam, best first,
each with its per-frame tokens (``T + 2``: a silence before the first frame and after the
last) and a score. Here with a zero LM (``ZeroLM``: no language model, its score 0) and the
options torchaudio's ``ctc_decoder`` gives it by default: ``beam_size_token`` every class,
``beam_threshold=50``, ``lm_weight=2`` (times the zero LM), ``sil_score=0``, CTC criterion;
``beam_size`` is our beam.

The silence is our blank, as the decoder wants a silence and we have none: the start state
is then a blank (a first label is emitted, as after any blank). The adapter maps the token
path by CTC's map (merge repeats, drop blanks), as torchaudio does.

``log_add`` decides what a hypothesis's score is:

- ``flashlight`` (torchaudio's default ``log_add=False``): two hypotheses with the same
  labelling and state merge into the better one, so a score is the log-probability of the
  labelling's best path (score ``path``), and a beam that never prunes returns first the
  labelling of the best path, not the most probable one;
- ``flashlight-logadd`` (``log_add=True``): they merge by log-add, so a score is the log of
  the probability of the labelling's paths the beam kept (score ``labelling``).
"""
from __future__ import annotations

import itertools

import numpy as np

from .._thirdparty import require
from .tf import check_beam


class FlashlightDecoder:
    """LexiconFreeDecoder with a zero LM and torchaudio's defaults (log_add=False)."""

    name = "flashlight"
    search = "beam"
    score = "path"
    blank = "any"
    dtype = "float32"  # what it computes in
    log_add = False
    packages = ("flashlight",)
    conventions = ("blank_token_idx=sil_token_idx=blank; log-probabilities; log_add=False: "
                   "same-state paths merge by max; score: the labelling's best path")

    def __init__(self):
        require(("flashlight",), extra="decoders")

    def decode(self, log_probs, lengths, *, blank: int, beam: int):
        from flashlight.lib.text import decoder as fl
        check_beam(beam)
        C = log_probs.shape[-1]
        options = fl.LexiconFreeDecoderOptions(
            beam_size=beam, beam_size_token=C, beam_threshold=50.0, lm_weight=2.0,
            sil_score=0.0, log_add=self.log_add, criterion_type=fl.CriterionType.CTC)
        decoder = fl.LexiconFreeDecoder(options, fl.ZeroLM(), blank, blank, [])
        out = []
        for n, n_frames in enumerate(int(x) for x in lengths):
            emissions = np.ascontiguousarray(log_probs[:n_frames, n], dtype=np.float32)
            results = decoder.decode(emissions.ctypes.data, n_frames, C)
            out.append([[[int(k) for k, _ in itertools.groupby(r.tokens) if k != blank],
                         float(r.score)] for r in results])
        return out


class FlashlightLogAddDecoder(FlashlightDecoder):
    """LexiconFreeDecoder with a zero LM and log_add=True."""

    name = "flashlight-logadd"
    score = "labelling"
    exact_beam = True  # at beam_size=prefix_count(T, C): log P to 2e-7 (float32 emissions)
    log_add = True
    conventions = ("blank_token_idx=sil_token_idx=blank; log-probabilities; log_add=True: "
                   "same-state paths merge by log-add; score: log P(labels) of its beam")
