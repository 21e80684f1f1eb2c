"""Decoders with one planted fault each, of the kinds the upstream trackers show: the judge
must name every one (tests/decoding/test_judge.py). Each wraps ctcbench's own decoders."""
from ctcbench.backends.decoders.own import GreedyDecoder, PrefixBeamDecoder
from ctcbench.core.ctcmath import collapse


def _merge(labels):
    return [k for i, k in enumerate(labels) if i == 0 or labels[i - 1] != k]


class EmptyGreedy(GreedyDecoder):
    def decode(self, log_probs, lengths, *, blank, beam=1):
        return [[[[], h[0][1]]] for h in super().decode(log_probs, lengths, blank=blank)]


class BlankKeptGreedy(GreedyDecoder):  # merges repeats, forgets to drop the blank
    score = "none"

    def decode(self, log_probs, lengths, *, blank, beam=1):
        best = log_probs.argmax(-1)
        return [[[_merge(best[:int(n_frames), n].tolist()), None]]
                for n, n_frames in enumerate(lengths)]


class BlanksFirstGreedy(GreedyDecoder):  # keras#12238: blanks removed, then repeats merged
    score = "none"

    def decode(self, log_probs, lengths, *, blank, beam=1):
        best = log_probs.argmax(-1)
        return [[[_merge([k for k in best[:int(t), n].tolist() if k != blank]), None]]
                for n, t in enumerate(lengths)]


class NoMergeGreedy(GreedyDecoder):  # blanks removed, repeats kept
    score = "none"

    def decode(self, log_probs, lengths, *, blank, beam=1):
        best = log_probs.argmax(-1)
        return [[[[k for k in best[:int(t), n].tolist() if k != blank], None]]
                for n, t in enumerate(lengths)]


class LastClassBlankGreedy(GreedyDecoder):  # assumes TensorFlow's blank = C - 1
    score = "none"

    def decode(self, log_probs, lengths, *, blank, beam=1):
        best = log_probs.argmax(-1)
        C = log_probs.shape[-1]
        return [[[list(collapse(best[:int(t), n].tolist(), blank=C - 1)), None]]
                for n, t in enumerate(lengths)]


class PaddingReadingGreedy(GreedyDecoder):  # ignores the lengths
    def decode(self, log_probs, lengths, *, blank, beam=1):
        return super().decode(log_probs, [len(log_probs)] * len(lengths), blank=blank)


class DoubleMergeBeam(PrefixBeamDecoder):  # tensorflow#9550: merge_repeated a second time
    def decode(self, log_probs, lengths, *, blank, beam):
        out = super().decode(log_probs, lengths, blank=blank, beam=beam)
        return [[[_merge(labels), score] for labels, score in hyps] for hyps in out]


class OverScoringBeam(PrefixBeamDecoder):  # scores in probability space, not log
    def decode(self, log_probs, lengths, *, blank, beam):
        out = super().decode(log_probs, lengths, blank=blank, beam=beam)
        return [[[labels, score + 0.5] for labels, score in hyps] for hyps in out]


class ShiftedLabelsBeam(PrefixBeamDecoder):  # subtracts 1 for a blank at 0, twice
    def decode(self, log_probs, lengths, *, blank, beam):
        out = super().decode(log_probs, lengths, blank=blank, beam=beam)
        return [[[[k - 1 for k in labels], s] for labels, s in hyps] for hyps in out]


class AbortingOnNaNGreedy(GreedyDecoder):  # a native kernel that dies on NaN
    def decode(self, log_probs, lengths, *, blank, beam=1):
        import os
        import numpy as np
        if np.isnan(log_probs).any():
            os.abort()
        return super().decode(log_probs, lengths, blank=blank)


class HangingGreedy(GreedyDecoder):  # a kernel that never returns on NaN; a short timeout
    isolated = True
    timeout_s = 1.5

    def decode(self, log_probs, lengths, *, blank, beam=1):
        import time
        import numpy as np
        while np.isnan(log_probs).any():
            time.sleep(0.1)
        return super().decode(log_probs, lengths, blank=blank)
