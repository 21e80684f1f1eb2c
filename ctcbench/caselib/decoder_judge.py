"""Judge a decoder's hypotheses and an aligner's paths against exact answers, and name faults.

What each decoder must satisfy follows from what it declares (``DecoderTraits``):
  * every decoder: labels in ``[0, C)``, never the blank, one hypothesis or more, distinct,
    at most ``beam`` of them, best first; the sample's own frames read, not its padding (a
    short sample's answer that is the one of all the batch's frames: "padding read as
    frames");
  * greedy: the collapse of the per-frame argmax (ties to the lowest class, or any argmax
    where it declares ``ties = "any"``); a ``path`` score is the best path's log-probability;
  * beam: a ``labelling`` score is at most log P(labels) (a beam sums only the paths it kept)
    and equal to it where ``exact_beam`` and the beam is at least ``prefix_count(T, C)``;
    a ``path`` score is at most its best path's log-probability. Scores that are the other
    kind's on every hypothesis where the two differ are named as such, and ``labelling``
    scores that count a label following itself without a blank as two labels as the prefix
    beam search's repeat-extension bug (:func:`repeat_extension_logprob`). The first
    hypothesis is the most probable labelling where the beam is ``prefix_count(T, C)`` wide
    and exact, and, for any beam, where that labelling's best single path has probability
    above 1/2 (its prefixes then hold over half the mass at every frame, so no beam can drop
    them);
  * aligner: a target with a path in the frames gets a path of the sample's T frames that
    collapses to it, its score the path's log-probability, and that the best path's
    (``best_path_score``); a target with none is refused (an exception), not aligned.
The most probable labelling comes from brute force where ``C**T`` is small, else from the
case (worked out by hand, or planted). :func:`name_fault` names what a wrong answer did.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

import numpy as np

from ctcbench.core.ctcmath import collapse, minimal_path
from ctcbench.core.decoding import (best_path_score, labelling_logprob, most_probable,
                                    path_score, prefix_count)

BRUTE_FORCE_PATHS = 200_000  # C**T up to this: the most probable labelling by brute force
TOLERANCE = {"float64": 1e-9, "float32": 1e-4}  # score error, relative to 1 + |log P|
REPEAT_EXTENSION = "a repeat extended without a blank"  # the start of that fault's messages


@dataclass(frozen=True)
class Finding:
    sample: int
    check: str  # a short name: labels, greedy, most-probable, score, order, path, ...
    message: str

    def __str__(self) -> str:
        return f"sample {self.sample}: {self.message}"


def tolerance(dtype: str, lp: np.ndarray, value: float) -> float:
    """How far a score computed in ``dtype`` may be from ``value`` (``lp``: the sample)."""
    return TOLERANCE[dtype] * (1 + abs(value))


def _close(a: float, b: float, dtype: str, lp: np.ndarray) -> bool:
    if np.isneginf(a) or np.isneginf(b):
        return bool(np.isneginf(a) and np.isneginf(b))
    return abs(a - b) <= tolerance(dtype, lp, b)


def _above(a: float, b: float, dtype: str, lp: np.ndarray) -> bool:
    """``a`` above ``b`` by more than the tolerance (anything finite is above ``-inf``)."""
    if np.isneginf(b):
        return bool(a > b)
    return bool(a > b + tolerance(dtype, lp, b))


def most_probable_known(lp: np.ndarray, blank: int, by_hand) -> tuple[set, str] | None:
    """The most probable labellings of one sample and where that is known from."""
    T, C = lp.shape
    if C ** T <= BRUTE_FORCE_PATHS:
        return most_probable(lp, blank=blank)[0], "brute force"
    return ({tuple(by_hand)}, "the case") if by_hand is not None else None


def judge_decoder(traits, case, hyps, *, beam: int) -> list[Finding]:
    """Findings for ``hyps`` (per sample, a list of ``Hypothesis``) on ``case``."""
    padded, lengths = case.batch()  # (T, N, C): a short sample's padded frames, as sent
    out = []
    for n, (lp, sample_hyps) in enumerate(zip(case.samples, hyps)):
        full = padded[:, n] if lengths[n] < len(padded) else None
        out += _one_sample(traits, lp, case.blank, sample_hyps, beam, n,
                           case.labels[n] if case.labels else None, full)
    return out


def _one_sample(traits, lp, blank, hyps, beam, n, by_hand, full=None) -> list[Finding]:
    T, C = lp.shape
    dtype = getattr(traits, "dtype", "float64")
    if not hyps:
        return [Finding(n, "hypotheses", "no hypothesis returned")]
    bad = [h.labels for h in hyps if any(k < 0 or k >= C for k in h.labels)]
    if bad:
        return [Finding(n, "labels", f"labels outside [0, {C}): {list(bad[0])}")]
    greedy = collapse(lp.argmax(1), blank=blank)  # (ties to the lowest class)
    known = most_probable_known(lp, blank, by_hand)
    if full is not None and reads_padding(hyps[0].labels, lp, full, blank, known,
                                          beam=None if traits.search == "greedy" else beam):
        return [Finding(n, "padding", padding_message(hyps[0].labels, lp, full, blank, known))]
    out = []
    if traits.search == "greedy":
        got = hyps[0].labels
        best = float(lp.max(1).sum())
        ok = got == greedy or (traits.ties == "any" and blank not in got
                               and _close(best_path_score(lp, got, blank=blank), best,
                                          "float64", lp))
        if not ok:
            out.append(Finding(n, "greedy", name_fault(got, greedy, lp, blank)))
        elif traits.score == "path" and hyps[0].score is None:
            out.append(Finding(n, "score", "declares path scores, returned None"))
        elif traits.score == "path" and not _close(hyps[0].score, best, dtype, lp):
            out.append(Finding(n, "score", f"score {hyps[0].score:.12g}, but the best path's "
                                           f"log-probability is {best:.12g}"))
        elif traits.score == "labelling" and blank not in got:  # log P(got), computed apart
            out += score_findings("labelling", lp, blank, [got], [hyps[0].score], dtype,
                                  True, n, full=True) if hyps[0].score is not None else [
                Finding(n, "score", "declares labelling scores, returned None")]
        return out
    labels = [h.labels for h in hyps]
    if len(set(labels)) < len(labels):
        twice = next(k for k in labels if labels.count(k) > 1)
        out.append(Finding(n, "distinct", f"{list(twice)} returned {labels.count(twice)} times "
                                          "(paths of one labelling not merged)"))
    if len(hyps) > beam:
        out.append(Finding(n, "beam", f"{len(hyps)} hypotheses from a beam of {beam}"))
    exact = traits.exact_beam and beam >= prefix_count(T, C)
    with_blank = [k for k in labels if blank in k]
    if with_blank:
        out.append(Finding(n, "labels", f"the blank (class {blank}) left in a hypothesis: "
                                        f"{list(with_blank[0])}" if with_blank[0] != labels[0]
                           else name_fault(labels[0], greedy, lp, blank)))
        return out
    scores = [h.score for h in hyps]
    if traits.score != "none" and any(s is None for s in scores):
        out.append(Finding(n, "score", f"declares {traits.score} scores, returned None"))
    elif traits.score != "none":
        if any(_above(b, a, dtype, lp) for a, b in zip(scores, scores[1:])):
            out.append(Finding(n, "order", f"not best first: scores {_short(scores)}"))
        out += score_findings(traits.score, lp, blank, labels, scores, dtype, exact, n,
                              full=beam >= prefix_count(T, C))
    if known is not None and labels[0] not in known[0]:
        want = min(known[0])
        sure = best_path_score(lp, want, blank=blank) > np.log(0.5)
        if exact or sure:
            why = (f"a beam of {beam} >= {prefix_count(T, C)} prefixes" if exact
                   else "its best path alone has probability > 1/2")
            fault = name_fault(labels[0], want, lp, blank)
            named = [f.check for f in out if f.check in ("score-kind", "repeat-extension")]
            if not (named == ["repeat-extension"] and fault.startswith(REPEAT_EXTENSION)):
                out.insert(len(named), Finding(n, "most-probable",
                                               f"{fault} ({why}; answer by {known[1]})"))
    return out  # the cause first: a named score fault, else a wrong answer, then the rest


def score_findings(declared, lp, blank, labels, scores, dtype, exact, n=0, *,
                   full: bool = False) -> list[Finding]:
    """What is wrong with a beam's ``scores`` for its ``labels``, held to the ``declared``
    kind: a named fault (scores of the other kind; the repeat-extension bug) where one fits
    every hypothesis it can tell apart, else the first score out of bounds. ``exact``: the
    scores must equal the truth; ``full``: nothing was pruned (a beam of every prefix, or no
    search at all), so a score equal to the other kind's is no partial sum that happens to
    be one path's."""
    logp = labelling_logprob(lp, labels, blank=blank)  # (K,)
    best = np.array([best_path_score(lp, k, blank=blank) for k in labels])  # (K,)
    truth = logp if declared == "labelling" else best
    other = best if declared == "labelling" else logp
    apart = [i for i in range(len(labels)) if _apart(logp[i], best[i], dtype, lp)]
    if full and apart and all(_close(scores[i], other[i], dtype, lp)
                     and not _close(scores[i], truth[i], dtype, lp) for i in apart):
        i = apart[0]
        said = (f"{list(labels[i])} scored {scores[i]:.12g}, its best path's log-prob, where "
                f"log P(labels) is {logp[i]:.12g}")
        if declared == "labelling":
            return [Finding(n, "score-kind", "path scores declared as labelling: the scores "
                            "are each hypothesis's best single path, not log P(labels) summed "
                            f"over all its paths ({said}); declare score = 'path', or sum "
                            "a labelling's paths (log-add, not max)")]
        return [Finding(n, "score-kind", "labelling scores declared as path: the scores sum "
                        "all of a hypothesis's paths, not its best path's log-prob ("
                        f"{list(labels[i])} scored {scores[i]:.12g}, log P(labels) "
                        f"{logp[i]:.12g}, its best path {best[i]:.12g}); declare score = "
                        "'labelling'")]
    if declared == "labelling":
        repeated = [i for i, k in enumerate(labels) if _merge(k) != k
                    and not _close(scores[i], logp[i], dtype, lp)]
        bugged = {i: repeat_extension_logprob(lp, labels[i], blank=blank) for i in repeated}
        counted = [i for i, v in bugged.items() if _apart(v, logp[i], dtype, lp) and (
            _close(scores[i], v, dtype, lp)  # every path of the bug's count, or a pruned part:
            or (not exact and _above(scores[i], logp[i], dtype, lp)
                and not _above(scores[i], v, dtype, lp)))]
        if repeated and len(counted) == len(repeated):
            i = repeated[0]
            return [Finding(n, "repeat-extension", f"{REPEAT_EXTENSION} (the "
                            "prefix beam search bug: a prefix ending in label a, extended by a "
                            "from a path that ends in a, not only from one ending in blank): "
                            f"{list(labels[i])} scored {scores[i]:.12g}, which counts 'a a' "
                            f"as two labels, where log P(labels) is {logp[i]:.12g}")]
    what = "log P(labels)" if declared == "labelling" else "its best path's log-prob"
    for k, s, t in zip(labels, scores, truth):
        if (exact and not _close(s, t, dtype, lp)) or _above(s, t, dtype, lp):
            return [Finding(n, "score", f"{list(k)} scored {s:.12g}, but {what} is {t:.12g}"
                            + ("" if exact else " (a beam's score cannot exceed it)"))]
    return []


def _apart(a: float, b: float, dtype: str, lp) -> bool:
    """``a`` (finite) and ``b`` far enough apart (10 tolerances, or ``b`` is ``-inf``) for a
    score to tell them apart."""
    if np.isneginf(b):
        return bool(np.isfinite(a))
    return bool(np.isfinite(a) and np.isfinite(b) and abs(a - b) > 10 * tolerance(dtype, lp, b))


def repeat_extension_logprob(lp: np.ndarray, labels, *, blank: int = 0) -> float:
    """log P(labels) as a prefix beam search with the repeat-extension bug sums it: a label
    may follow the same label without a blank between (the forward recursion over the
    extended labels with that skip allowed), so a path's run "a a" counts for ``a a`` as well
    as for ``a``."""
    ext = [blank]
    for k in labels:
        ext += [int(k), blank]
    S = len(ext)
    alpha = np.full(S, -np.inf)  # (S,)
    alpha[:2] = lp[0, ext[:2]]
    skip = np.array([s >= 2 and ext[s] != blank for s in range(S)])  # repeats allowed
    for t in range(1, len(lp)):
        prev = alpha
        alpha = prev.copy()
        alpha[1:] = np.logaddexp(alpha[1:], prev[:-1])
        alpha[2:] = np.where(skip[2:], np.logaddexp(alpha[2:], prev[:-2]), alpha[2:])
        alpha = alpha + lp[t, ext]
    return float(np.logaddexp(alpha[-1], alpha[-2]) if S > 1 else alpha[-1])


def reads_padding(got, lp: np.ndarray, full: np.ndarray, blank: int, known=None, *,
                  beam: int | None = None) -> bool:
    """``got`` is what a decoder gives on all of ``full (T, C)``'s frames, padding included,
    and no answer of the sample's own ``lp (T_n, C)`` (its greedy one, its most probable
    ones where ``known``): the decoder read the padded frames as frames. Said of a greedy
    decoder (``beam`` None), a beam that holds every prefix of the sample, or an answer with
    no path in the sample's frames; a narrower beam may return anything, that one too."""
    got = tuple(got)
    own = {collapse(lp.argmax(1), blank=blank), *(known[0] if known else ())}
    if got in own:
        return False
    T_n, C = lp.shape
    if beam is not None and beam < prefix_count(T_n, C) and (
            blank in got or np.isfinite(labelling_logprob(lp, [got], blank=blank)[0])):
        return False
    if got == collapse(full.argmax(1), blank=blank):
        return True
    T, C = full.shape
    return C ** T <= BRUTE_FORCE_PATHS and got in most_probable(full, blank=blank)[0]


def padding_message(got, lp: np.ndarray, full: np.ndarray, blank: int, known=None) -> str:
    own = min(known[0]) if known else collapse(lp.argmax(1), blank=blank)
    return (f"padding read as frames (lengths ignored): it decoded all {len(full)} frames, "
            f"not the sample's {len(lp)}: expected {list(own)}, got {list(got)}")


def judge_aligner(traits, case, outcomes) -> list[Finding]:
    """Findings for ``outcomes`` (per sample, ``(path, score)`` or the exception it raised)."""
    return [f for n, (lp, got) in enumerate(zip(case.samples, outcomes))
            for f in judge_alignment(traits, lp, aligner_target(case, n), got,
                                     blank=case.blank, n=n)]


def judge_alignment(traits, lp: np.ndarray, target, got, *, blank: int,
                    n: int = 0) -> list[Finding]:
    """One sample: ``got`` is ``(path, score)`` or the exception raised. A target with no
    path in the frames must be refused (an exception); any other must be aligned: a path of
    ``T`` frames that collapses to it, the best path's log-prob, scored as declared."""
    T, C = lp.shape
    target = tuple(int(k) for k in target)
    needed = len(minimal_path(target, blank=blank))
    if needed > T or T == 0:
        if isinstance(got, BaseException):
            return []
        return [Finding(n, "infeasible", f"returned a path for the target {list(target)}, which "
                        f"has none in {T} frames (it needs {needed}: a blank between repeated "
                        f"labels): expected a refusal (an exception)")]
    if isinstance(got, BaseException):
        return [Finding(n, "raised", f"refused a target that has a path ({list(target)} in {T} "
                        f"frames): {_raised(got)}")]
    dtype = getattr(traits, "dtype", "float64")
    path, score = got
    best = best_path_score(lp, target, blank=blank)
    if len(path) != T or any(k < 0 or k >= C for k in path):
        return [Finding(n, "path", f"a path of {len(path)} frames with classes "
                                   f"{sorted(set(path))[:6]}, not {T} frames in [0, {C})")]
    if collapse(path, blank=blank) != target:
        return [Finding(n, "path", name_alignment_fault(path, target, blank))]
    if not _close(path_score(lp, path), best, dtype, lp):
        return [Finding(n, "best-path", f"not the best path: its path has log-prob "
                                        f"{path_score(lp, path):.12g}, the target's best "
                                        f"{best:.12g}")]
    if traits.score != "none" and score is not None and not _close(score, best, dtype, lp):
        return [Finding(n, "score", f"score {score:.12g}, the best path's log-prob {best:.12g}")]
    return []


def _raised(exc: BaseException) -> str:
    """What an aligner raised, its worker's wrapping taken off."""
    text = str(exc)
    inner = re.match(r"backend '.*?' raised (\w+: .*)", text, re.S)
    return (inner.group(1) if inner else f"{type(exc).__name__}: {text}")[:200]


def name_alignment_fault(path, target, blank: int) -> str:
    """What an aligner whose ``path`` does not collapse to ``target`` most likely did."""
    spelled = list(collapse(path, blank=blank))
    said = f"the path collapses to {spelled}, not the target {list(target)}"
    other = f"a path of another labelling: {said}"
    kinds = set(int(k) for k in path)
    if len(kinds) == 1 and blank not in kinds:
        other = kinds.pop()
        return (f"class {other} in every frame{' for an empty target' if not target else ''},"
                f" not the blank ({blank}): {said}")
    if _merge(spelled) == _merge(list(target)) and len(spelled) < len(target):
        return f"repeated labels entered on consecutive frames, with no blank between: {said}"
    return other


def aligner_target(case, n: int) -> tuple[int, ...]:
    """What an aligner aligns in sample ``n``: the case's target, else the greedy labelling."""
    target = case.targets[n] if case.targets else None
    return tuple(target) if target is not None else collapse(case.samples[n].argmax(1),
                                                             blank=case.blank)


def _merge(labels) -> tuple[int, ...]:
    return tuple(k for i, k in enumerate(labels) if i == 0 or labels[i - 1] != k)


def name_fault(got, want, lp: np.ndarray, blank: int) -> str:
    """What a decoder that returned ``got`` where ``want`` was right most likely did wrong."""
    got, want = tuple(got), tuple(want)
    argmax = tuple(int(k) for k in lp.argmax(1))
    no_blanks = tuple(k for k in argmax if k != blank)
    said = f"expected {list(want)}, got {list(got)}"
    best_path = collapse(argmax, blank=blank)
    if got == best_path and got != want:
        return f"the best path's labelling, not the most probable one: {said}"
    if not got and want:
        return f"empty output: {said}"
    for other in set(argmax) - {blank}:  # a class the frames use, read as the blank
        if got == collapse(argmax, blank=other) and got != want:
            return f"class {other} treated as the blank, not {blank}: {said}"
    for shift in (-1, 1):
        if got == tuple(k + shift for k in want) and want:
            return f"labels shifted by {shift:+d} (an index offset for the blank): {said}"
    if blank in got:
        return f"the blank (class {blank}) left in the output: {said}"
    if got == no_blanks and got != want:
        return f"repeats not merged (blanks removed, repeated labels kept): {said}"
    if _merge(got) == _merge(want) and _repeats(got) > _repeats(want):
        return (f"{REPEAT_EXTENSION} (a label following itself with no blank between read as "
                f"two, the prefix beam search's repeat bug): {said}")
    if got == _merge(want) and got != want:
        return f"repeats merged across a blank (a repeat a blank separates was merged): {said}"
    if got == _merge(no_blanks) and got != want:
        return f"repeats merged across a blank (blanks removed before merging): {said}"
    if got == want[::-1] and len(want) > 1:
        return f"reversed in time: {said}"
    return said


def _repeats(labels) -> int:
    return sum(a == b for a, b in zip(labels, labels[1:]))


def _short(values) -> str:
    text = ", ".join(f"{v:.6g}" for v in values[:5])
    return f"[{text}{', ...' if len(values) > 5 else ''}]"
