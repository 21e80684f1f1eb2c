"""ctcbench's own decoders and aligner, float64: greedy, a prefix beam search, Viterbi alignment.

The contract is ``ctcbench.runtime.decoders``'s. The prefix beam search (Hannun et al.,
"First-Pass Large Vocabulary Continuous Speech Recognition using Bi-Directional Recurrent
DNNs", 2014, section 3) keeps, per prefix, the log-probability of its paths ending in a blank
and in a label; a beam of ``prefix_count(T, C)`` never prunes, and its scores are then each
labelling's exact log-probability (checked by brute force in tests/decoding).
"""
from __future__ import annotations

import numpy as np

from ctcbench.core.ctcmath import collapse
from ctcbench.core.extended import extended_labels
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
        return [_prefix_beam(log_probs[:int(n_frames), n], blank, beam)
                for n, n_frames in enumerate(lengths)]


def _prefix_beam(lp: np.ndarray, blank: int, beam: int) -> list:
    """Hypotheses ``[labels, log P]`` of one sample's ``lp (T, C)``, best first."""
    C = lp.shape[1]
    prefixes: list[tuple[int, ...]] = [()]
    p_blank, p_label = np.array([0.0]), np.array([-np.inf])  # (B,) log P, ending in blank / label
    for frame in lp:  # frame (C,)
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
        cells = np.flatnonzero(np.isfinite(grow).ravel())
        keep_cells = cells[np.argsort(-grow.ravel()[cells], kind="stable")[:beam]]
        cand = [(float(stay[b]), b, None) for b in range(len(prefixes)) if np.isfinite(stay[b])]
        cand += [(float(grow.ravel()[i]), i // C, i % C) for i in keep_cells]
        cand.sort(key=lambda x: -x[0])
        new_prefixes, new_blank, new_label = [], [], []
        for _, b, c in cand[:beam]:
            if c is None:
                new_prefixes.append(prefixes[b])
                new_blank.append(stay_blank[b])
                new_label.append(stay_label[b])
            else:
                new_prefixes.append(prefixes[b] + (int(c),))
                new_blank.append(-np.inf)
                new_label.append(grow[b, c])
        prefixes = new_prefixes
        p_blank, p_label = np.array(new_blank), np.array(new_label)
    total = np.logaddexp(p_blank, p_label)
    order = sorted(range(len(prefixes)), key=lambda b: (-total[b], prefixes[b]))
    return [[list(prefixes[b]), float(total[b])] for b in order]


class ViterbiAligner:
    """The most probable path of the target (max-plus over its extended labels)."""

    name = "viterbi"
    role = "aligner"
    score = "path"
    conventions = "Viterbi over blank, l1, blank, ..., blank; score: the path's log-probability"

    def align(self, log_probs, target, *, blank: int):
        check_align_inputs(log_probs, target, blank=blank)
        T = log_probs.shape[0]
        target = np.asarray(target, dtype=np.int64).reshape(1, -1)
        ext = extended_labels(target, np.array([target.shape[1]]), blank)[0][0]  # (S,)
        S = len(ext)
        skip = np.zeros(S, dtype=bool)
        skip[2:] = (ext[2:] != blank) & (ext[2:] != ext[:-2])
        score = np.full(S, -np.inf)
        score[:2] = log_probs[0, ext[:2]] if T else -np.inf
        back = np.zeros((T, S), dtype=np.int64)  # (T, S) the state each came from
        for t in range(1, T):
            options = np.full((3, S), -np.inf)  # from s, s - 1, s - 2
            options[0] = score
            options[1, 1:] = score[:-1]
            options[2, 2:] = np.where(skip[2:], score[:-2], -np.inf)
            step = options.argmax(0)  # (S,) ties: stay, then the nearer state
            back[t] = np.arange(S) - step
            score = options[step, np.arange(S)] + log_probs[t, ext]
        ends = [S - 1] if S == 1 else [S - 2, S - 1]
        end = max(ends, key=lambda s: score[s])
        if T == 0 or not np.isfinite(score[end]):
            raise ValueError(f"target: expected one with a path of {T} frames, got "
                             f"{target[0].tolist()}")
        states = [end]
        for t in range(T - 1, 0, -1):
            states.append(int(back[t, states[-1]]))
        return [[int(ext[s]) for s in reversed(states)], float(score[end])]
