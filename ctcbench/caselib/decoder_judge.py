"""Judge a decoder's hypotheses and an aligner's paths against exact answers, and name faults.

What each decoder must satisfy follows from what it declares (``DecoderTraits``):
  * every decoder: labels in ``[0, C)``, never the blank, one hypothesis or more, distinct,
    at most ``beam`` of them, best first;
  * greedy: the collapse of the per-frame argmax (ties to the lowest class, or any argmax
    where it declares ``ties = "any"``); a ``path`` score is the best path's log-probability;
  * beam: a ``labelling`` score is at most log P(labels) (a beam sums only the paths it kept)
    and equal to it where ``exact_beam`` and the beam is at least ``prefix_count(T, C)``;
    the first hypothesis is the most probable labelling where that beam is that wide, and,
    for any beam, where that labelling's best single path has probability above 1/2 (its
    prefixes then hold over half the mass at every frame, so no beam can drop them);
  * aligner: a path of the sample's T frames that collapses to the target, its score the
    path's log-probability, and that the best path's (``best_path_score``).
The most probable labelling comes from brute force where ``C**T`` is small, else from the
case (worked out by hand, or planted). :func:`name_fault` names what a wrong answer did.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctcbench.core.ctcmath import collapse
from ctcbench.core.decoding import (best_path_score, labelling_logprob, most_probable,
                                    path_score, prefix_count)

BRUTE_FORCE_PATHS = 200_000  # C**T up to this: the most probable labelling by brute force
TOLERANCE = {"float64": 1e-9, "float32": 1e-4}  # score error, relative to 1 + |log P|


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
    if np.isneginf(a) and np.isneginf(b):
        return True
    return abs(a - b) <= tolerance(dtype, lp, b)


def most_probable_known(lp: np.ndarray, blank: int, by_hand) -> tuple[set, str] | None:
    """The most probable labellings of one sample and where that is known from."""
    T, C = lp.shape
    if C ** T <= BRUTE_FORCE_PATHS:
        return most_probable(lp, blank=blank)[0], "brute force"
    return ({tuple(by_hand)}, "the case") if by_hand is not None else None


def judge_decoder(traits, case, hyps, *, beam: int) -> list[Finding]:
    """Findings for ``hyps`` (per sample, a list of ``Hypothesis``) on ``case``."""
    out = []
    for n, (lp, sample_hyps) in enumerate(zip(case.samples, hyps)):
        out += _one_sample(traits, lp, case.blank, sample_hyps, beam, n,
                           case.labels[n] if case.labels else None)
    return out


def _one_sample(traits, lp, blank, hyps, beam, n, by_hand) -> list[Finding]:
    T, C = lp.shape
    dtype = getattr(traits, "dtype", "float64")
    if not hyps:
        return [Finding(n, "hypotheses", "no hypothesis returned")]
    bad = [h.labels for h in hyps if any(k < 0 or k >= C for k in h.labels)]
    if bad:
        return [Finding(n, "labels", f"labels outside [0, {C}): {list(bad[0])}")]
    out = []
    greedy = collapse(lp.argmax(1), blank=blank)  # (ties to the lowest class)
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
        if any(b > a + tolerance(dtype, lp, a) for a, b in zip(scores, scores[1:])):
            out.append(Finding(n, "order", f"not best first: scores {_short(scores)}"))
        truth = (labelling_logprob(lp, labels, blank=blank) if traits.score == "labelling"
                 else np.array([best_path_score(lp, k, blank=blank) for k in labels]))
        what = "log P(labels)" if traits.score == "labelling" else "its best path's log-prob"
        for k, s, t in zip(labels, scores, truth):
            if (exact and not _close(s, t, dtype, lp)) or s > t + tolerance(dtype, lp, t):
                out.append(Finding(n, "score", f"{list(k)} scored {s:.12g}, but {what} is {t:.12g}"
                                   + ("" if exact else " (a beam's score cannot exceed it)")))
                break
    known = most_probable_known(lp, blank, by_hand)
    if known is not None and labels[0] not in known[0]:
        want = min(known[0])
        sure = best_path_score(lp, want, blank=blank) > np.log(0.5)
        if exact or sure:
            why = (f"a beam of {beam} >= {prefix_count(T, C)} prefixes" if exact
                   else "its best path alone has probability > 1/2")
            out.insert(0, Finding(n, "most-probable", f"{name_fault(labels[0], want, lp, blank)}"
                                                      f" ({why}; answer by {known[1]})"))
    return out  # a wrong answer first: its fault is the cause of the rest


def judge_aligner(traits, case, alignments) -> list[Finding]:
    """Findings for ``alignments`` (per sample, ``(path, score)``)."""
    dtype = getattr(traits, "dtype", "float64")
    out = []
    for n, (lp, got) in enumerate(zip(case.samples, alignments)):
        target = aligner_target(case, n)
        path, score = got
        T, C = lp.shape
        best = best_path_score(lp, target, blank=case.blank)
        if len(path) != T or any(k < 0 or k >= C for k in path):
            out.append(Finding(n, "path", f"a path of {len(path)} frames with classes "
                                          f"{sorted(set(path))[:6]}, not {T} frames in [0, {C})"))
        elif collapse(path, blank=case.blank) != tuple(target):
            out.append(Finding(n, "path", f"the path collapses to "
                                          f"{list(collapse(path, blank=case.blank))}, not the "
                                          f"target {list(target)}"))
        elif not _close(path_score(lp, path), best, dtype, lp):
            out.append(Finding(n, "best-path", f"its path has log-prob {path_score(lp, path):.12g}"
                                               f", the best path of the target {best:.12g}"))
        elif traits.score != "none" and not _close(score, best, dtype, lp):
            out.append(Finding(n, "score", f"score {score:.12g}, the best path's log-prob "
                                           f"{best:.12g}"))
    return out


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
    if got == _merge(want) and got != want:
        return f"repeats merged across a blank (a repeat a blank separates was merged): {said}"
    if got == _merge(no_blanks) and got != want:
        return f"repeats merged across a blank (blanks removed before merging): {said}"
    if got == want[::-1] and len(want) > 1:
        return f"reversed in time: {said}"
    return said


def _short(values) -> str:
    text = ", ".join(f"{v:.6g}" for v in values[:5])
    return f"[{text}{', ...' if len(values) > 5 else ''}]"
