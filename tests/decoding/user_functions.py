"""Decoders and aligners as a user writes them: plain functions of the contract's signature,
written here from the definitions (the map B, Hannun et al.'s prefix beam search, a max-plus
recursion), not from ctcbench's own code. Two are right; each other one has one planted fault
of the kinds seen in the wild, which ``compare --decoder/--aligner`` must find and name
(tests/decoding/test_user_functions.py)."""
import itertools
import os
import signal
import time

import numpy as np

NEG = -np.inf


def _b(frames, blank):
    """The map B: merge repeats, then drop blanks."""
    return [int(k) for k, _ in itertools.groupby(frames) if k != blank]


def greedy(log_probs, lengths, *, blank, beam=1):
    """Best path: the per-frame argmax (first maximum), then B; its log-probability."""
    out = []
    for n, frames in enumerate(lengths):
        lp = log_probs[:int(frames), n]  # (T_n, C)
        out.append([[_b(lp.argmax(-1).tolist(), blank), float(lp.max(-1).sum())]])
    return out


greedy.search = "greedy"
greedy.score = "path"


def greedy_all_frames(log_probs, lengths, *, blank, beam=1):
    """Greedy that forgets ``lengths``: padded frames are decoded too."""
    return [[[_b(log_probs[:, n].argmax(-1).tolist(), blank),
              float(log_probs[:, n].max(-1).sum())]] for n in range(len(lengths))]


greedy_all_frames.search = "greedy"
greedy_all_frames.score = "path"


def _prefix_beam(lp, beam, blank, *, add=np.logaddexp, repeat_bug=False):
    """Prefix beam search over ``lp (T, C)``: prefix -> (log p ending in blank, in a label).
    ``add`` merges two paths' log-probabilities (``np.maximum``: a best-path beam);
    ``repeat_bug``: a prefix ending in ``a`` extended by ``a`` from a path that ends in ``a``
    too (the special case for a repeat forgotten)."""
    beams = {(): (0.0, NEG)}
    for t in range(len(lp)):
        nxt = {}

        def put(prefix, b=NEG, nb=NEG):
            ob, onb = nxt.get(prefix, (NEG, NEG))
            nxt[prefix] = (add(ob, b), add(onb, nb))

        for prefix, (pb, pnb) in beams.items():
            for c in range(lp.shape[1]):
                p = lp[t, c]
                if c == blank:
                    put(prefix, b=add(pb, pnb) + p)
                    continue
                extended = prefix + (c,)
                if prefix and prefix[-1] == c:
                    put(extended, nb=(add(pb, pnb) if repeat_bug else pb) + p)
                    put(prefix, nb=pnb + p)  # the repeat merges into the same label
                else:
                    put(extended, nb=add(pb, pnb) + p)
        ranked = sorted(nxt.items(), key=lambda kv: -add(*kv[1]))
        beams = dict(ranked[:beam])
    ranked = sorted(beams.items(), key=lambda kv: -add(*kv[1]))
    return [[list(prefix), float(add(*scores))] for prefix, scores in ranked]


def prefix_beam(log_probs, lengths, *, blank, beam):
    """Prefix beam search (Hannun et al. 2014), log P(labels) of each prefix kept."""
    return [_prefix_beam(log_probs[:int(t), n], beam, blank) for n, t in enumerate(lengths)]


prefix_beam.score = "labelling"
prefix_beam.exact_beam = True  # no pruning within a frame: exact when the beam holds all


def repeat_bug_beam(log_probs, lengths, *, blank, beam):
    """The classic bug: ``a`` after a prefix ending in ``a`` extends it from every path."""
    return [_prefix_beam(log_probs[:int(t), n], beam, blank, repeat_bug=True)
            for n, t in enumerate(lengths)]


repeat_bug_beam.score = "labelling"
repeat_bug_beam.exact_beam = True


def max_beam(log_probs, lengths, *, blank, beam):
    """A beam that merges paths by max: each score is its labelling's best path, though it
    declares nothing (so ``labelling`` scores are assumed)."""
    return [_prefix_beam(log_probs[:int(t), n], beam, blank, add=np.maximum)
            for n, t in enumerate(lengths)]


def max_beam_declared(log_probs, lengths, *, blank, beam):
    """The same beam, declared as what it is."""
    return max_beam(log_probs, lengths, blank=blank, beam=beam)


max_beam_declared.score = "path"


def _extended(target, blank):
    ext = [blank]
    for k in target:
        ext += [int(k), blank]
    return ext


def viterbi(log_probs, target, *, blank):
    """The target's most probable path by max-plus over blank, l1, blank, ..., blank;
    a ValueError when the target has no path in the frames."""
    T = len(log_probs)
    ext = _extended(target, blank)
    S = len(ext)
    needed = len(target) + sum(a == b for a, b in zip(target, target[1:]))
    if needed > T or T == 0:
        raise ValueError(f"target {list(target)} has no path in {T} frames")
    score = np.full((T, S), NEG)
    back = np.zeros((T, S), dtype=int)
    score[0, 0] = log_probs[0, ext[0]]
    if S > 1:
        score[0, 1] = log_probs[0, ext[1]]
    for t in range(1, T):
        for s in range(S):
            options = [(score[t - 1, s], s)]
            if s >= 1:
                options.append((score[t - 1, s - 1], s - 1))
            if s >= 2 and ext[s] != blank and ext[s] != ext[s - 2]:
                options.append((score[t - 1, s - 2], s - 2))
            best, back[t, s] = max(options)
            score[t, s] = best + log_probs[t, ext[s]]
    s = S - 1 if S == 1 or score[T - 1, S - 1] >= score[T - 1, S - 2] else S - 2
    final = score[T - 1, s]
    path = []
    for t in range(T - 1, -1, -1):
        path.append(ext[s])
        s = back[t, s]
    return [path[::-1], float(final)]


def segfault_when_full(log_probs, target, *, blank):
    """Dies of SIGSEGV when the target fills every frame (T == L), as a native kernel
    indexing one past its table does."""
    if len(target) == len(log_probs):
        os.kill(os.getpid(), signal.SIGSEGV)
    return viterbi(log_probs, target, blank=blank)


def abort_on_infeasible(log_probs, target, *, blank):
    """Aborts the process (an assert in C) on a target with no path, instead of raising."""
    needed = len(target) + sum(a == b for a, b in zip(target, target[1:]))
    if needed > len(log_probs):
        os.abort()
    return viterbi(log_probs, target, blank=blank)


def zeros_for_empty(log_probs, target, *, blank):
    """An empty target aligned as class 0 everywhere, whatever the blank."""
    if len(target) == 0:
        return [np.zeros(len(log_probs), dtype=np.int64), 0.0]
    return viterbi(log_probs, target, blank=blank)


def hangs_when_full(log_probs, target, *, blank):
    """Never returns when T == L (a loop that waits for a frame that is not there)."""
    while len(target) == len(log_probs):
        time.sleep(0.1)
    return viterbi(log_probs, target, blank=blank)


hangs_when_full.timeout_s = 2


def ctc_segmentation_align(log_probs, target, *, blank):
    """A forced aligner from PyPI as a user wraps it: ctc-segmentation's CTC segmentation
    with its default parameters, its state list read as a path (a state entered at a frame:
    that class; a stay or no state: the blank) and the sum of its char_probs as the score."""
    import ctc_segmentation as cs
    names = [str(c) for c in range(log_probs.shape[1])]
    config = cs.CtcSegmentationParameters(char_list=names, blank=blank)
    ground_truth, _ = cs.prepare_token_list(config, [np.asarray(target)])
    _, char_probs, states = cs.ctc_segmentation(config, log_probs, ground_truth)
    path = [int(s) if s in names else blank for s in states]
    return [path, float(np.sum(char_probs))]
