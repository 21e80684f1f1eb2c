"""The decoder case library: problems for decoders and aligners, with their known answers.

Files live in ``cases/decoders/`` (TOML or JSON, one family per file; the loss library skips
that folder), found, read and selected as the loss cases are (:mod:`ctcbench.caselib.loader`):
``[[case]]`` with ``name``, ``description``, ``provenance``, optional ``blank`` (default 0)
and ``beam`` (an integer, or ``"exact"``, the default: ``prefix_count(T, C)`` of the longest
sample, so no prefix is ever pruned), and

* ``[[case.sample]]``: one sample each, ``probs`` (rows of per-frame probabilities, normalised
  here) or ``logits`` (rows of scores, log-softmaxed here), and optionally ``labels``, the
  most probable labelling worked out by hand, ``greedy``, the best path's labelling by hand,
  and ``target``, the labelling an aligner is asked to align (default: ``labels``), which
  ``infeasible = true`` says has no path in the sample's frames (an aligner must refuse it);
* or ``[case.random]``: ``seed``, ``N``, ``T``, ``C``, ``scale`` (logits N(0, scale)) and
  optionally ``peaked`` (a margin added along one path of a random target of ``L`` labels;
  that target is each sample's ``labels`` and ``target`` where the path alone has
  probability > 1/2, which makes it the most probable labelling; a case where it is not is
  refused).

Padded frames (past a sample's length) spell, at near certainty, a label the sample does not
end on, so a decoder that reads them decodes that label and is caught.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ctcbench.caselib import fields as F
from ctcbench.caselib.library import DECODER_FOLDER as FOLDER
from ctcbench.caselib.loader import Library, check_common, select
from ctcbench.core.ctcmath import collapse, log_softmax, minimal_path
from ctcbench.core.decoding import path_score, prefix_count
from ctcbench.errors import expect, fail

_FIELDS = {"name", "description", "provenance", "blank", "beam", "sample", "random"}
_SAMPLE = {"probs", "logits", "labels", "greedy", "target", "infeasible"}
_RANDOM = {"seed", "N", "T", "C", "scale", "peaked", "L"}
PAD_LOGIT = 30.0  # a padded frame: this logit on one label, 0 elsewhere
MAX_EXACT_BEAM = 20_000  # beam = "exact" above this many prefixes is refused as the case loads


@dataclass(frozen=True)
class DecoderCase:
    name: str
    description: str
    provenance: str
    family: str
    samples: tuple[np.ndarray, ...]  # each (T_n, C) normalised log-probabilities
    blank: int = 0
    beam: int | str = "exact"
    labels: tuple = ()  # per sample: the most probable labelling known by hand, or None
    greedy: tuple = ()  # per sample: the best path's labelling known by hand, or None
    targets: tuple = ()  # per sample: what an aligner aligns; None: the greedy labelling
    source: str = ""
    extra: dict = field(default_factory=dict)
    folder: str = FOLDER  # what a glob may start with, wherever the file lies: decoders/*

    @property
    def C(self) -> int:
        return self.samples[0].shape[1]

    def batch(self) -> tuple[np.ndarray, np.ndarray]:
        """``(log_probs (T, N, C), lengths (N,))``; a sample's padded frames spell a label
        its own frames do not end on, so reading them changes its answer (``pad_frames``)."""
        T = max(s.shape[0] for s in self.samples)
        out = np.zeros((T, len(self.samples), self.C))  # (T, N, C)
        for n, s in enumerate(self.samples):
            out[:len(s), n] = s
            out[len(s):, n] = self.pad_frames(s, T - len(s))
        return out, np.array([len(s) for s in self.samples], dtype=np.int64)

    def pad_frames(self, sample: np.ndarray, count: int) -> np.ndarray:
        """``(count, C)`` log-probabilities: a label ``k`` and the blank in turn, each at near
        certainty, ``k`` not the label the sample's best path ends on (with C = 2, the blank
        first); one frame read past the end adds ``k`` where C > 2, two frames always do."""
        last = [k for k in sample.argmax(1) if k != self.blank][-1:]
        labels = [k for k in range(self.C) if k != self.blank and k not in last] or \
            [k for k in range(self.C) if k != self.blank]
        order = [labels[0], self.blank] if labels[0] not in last else [self.blank, labels[0]]
        frame = {k: log_softmax(np.where(np.arange(self.C) == k, PAD_LOGIT, 0.0)) for k in order}
        return np.array([frame[order[t % 2]] for t in range(count)]).reshape(count, self.C)

    def beam_width(self) -> int:
        if self.beam != "exact":
            return int(self.beam)
        return max(prefix_count(len(s), self.C) for s in self.samples)


def parse_decoder_case(raw: dict, *, family: str, source: str) -> DecoderCase:
    """Validate one raw table; an error names the file, the case and the field."""
    where = check_common(raw, source, _FIELDS)
    expect(("sample" in raw) != ("random" in raw), where,
           "either [[case.sample]] tables or one [case.random] table", sorted(raw))
    beam = raw.get("beam", "exact")
    if beam != "exact":
        F.integer(beam, f"{where} beam", lo=1)
    expect("random" not in raw or raw.get("blank", 0) == 0, f"{where} blank",
           "0 in a [case.random] case (its targets are drawn from the labels 1..C-1)",
           repr(raw.get("blank")))
    if "random" in raw:
        samples, labels, targets = _random(raw["random"], f"{where} random")
        greedy = (None,) * len(samples)
        C = samples[0].shape[1]
    else:
        rows = raw["sample"]
        expect(isinstance(rows, list) and rows and all(isinstance(r, dict) for r in rows),
               f"{where} sample", "a non-empty list of sample tables", repr(rows)[:80])
        samples, labels, greedy, targets = [], [], [], []
        for i, row in enumerate(rows):
            at = f"{where} sample[{i}]"
            bad = sorted(set(row) - _SAMPLE)
            expect(not bad, at, f"only the fields {', '.join(sorted(_SAMPLE))}", bad)
            expect(("probs" in row) != ("logits" in row), at, "one of probs or logits",
                   sorted(row))
            samples.append(_frames(row, at, samples[0].shape[1] if samples else None))
        C = samples[0].shape[1]
    blank = F.integer(raw.get("blank", 0), f"{where} blank", lo=0, hi=C - 1)
    if "sample" in raw:
        for i, row in enumerate(raw["sample"]):
            at = f"{where} sample[{i}]"
            known = {k: None if k not in row else tuple(F.int_list(
                row[k], f"{at}.{k}", lo=0, hi=C - 1, blank=blank)) for k in
                ("labels", "greedy", "target")}
            labels.append(known["labels"])
            greedy.append(known["greedy"])
            targets.append(known["target"] if known["target"] is not None else known["labels"])
    for i, (s, t) in enumerate(zip(samples, targets)):
        if t is not None:
            field = "target" if "sample" in raw and "target" in raw["sample"][i] else "labels"
            no_path = raw["sample"][i].get("infeasible", False) if "sample" in raw else False
            expect(isinstance(no_path, bool), f"{where} sample[{i}].infeasible", "true or false",
                   repr(no_path))
            expect((len(minimal_path(t, blank=blank)) <= len(s)) != no_path,
                   f"{where} sample[{i}].{field}", f"labels with {'no' if no_path else 'a'} "
                   f"path in its {len(s)} frames" + (" (infeasible = true)" if no_path else ""),
                   list(t))
    if beam == "exact":
        width = max(_exact_width(len(s), C) for s in samples)
        expect(width <= MAX_EXACT_BEAM, f"{where} beam", "an integer for a case this large "
               f"(an exact beam would hold more than {MAX_EXACT_BEAM} prefixes)", "'exact'")
    return DecoderCase(raw["name"], raw["description"].strip(), raw["provenance"].strip(),
                       family, tuple(samples), blank, beam, tuple(labels), tuple(greedy),
                       tuple(targets), source)


def _exact_width(T: int, C: int) -> int:
    """``prefix_count(T, C)``, counted only up to past ``MAX_EXACT_BEAM`` (the full count of a
    long case has thousands of digits)."""
    total, term = 0, 1
    for _ in range(T + 1):
        total, term = total + term, term * (C - 1)
        if total > MAX_EXACT_BEAM:
            break
    return total


def _frames(row: dict, where: str, width) -> np.ndarray:
    key = "probs" if "probs" in row else "logits"
    values = F.table(row[key], f"{where}.{key}", width=width)
    expect(values.shape[0] >= 1 and values.shape[1] >= 2, f"{where}.{key}",
           "at least one frame of at least two classes", f"shape {values.shape}")
    if key == "logits":
        expect(bool(np.isfinite(values).all()), f"{where}.logits", "finite numbers",
               "a NaN or inf")
        return log_softmax(values)
    expect(bool((values >= 0).all() & np.isfinite(values).all()), f"{where}.probs",
           "finite non-negative probabilities", "a negative, NaN or inf entry")
    sums = values.sum(axis=1, keepdims=True)
    expect(bool((sums > 0).all()), f"{where}.probs", "rows with a positive sum", "a zero row")
    with np.errstate(divide="ignore"):
        return np.log(values / sums)


def _random(spec, where: str):
    expect(isinstance(spec, dict), where, "a table", repr(spec))
    bad = sorted(set(spec) - _RANDOM)
    expect(not bad, where, f"only the fields {', '.join(sorted(_RANDOM))}", bad)
    rng = np.random.default_rng(F.integer(spec.get("seed", 0), f"{where}.seed", lo=0))
    N = F.integer(spec.get("N", 1), f"{where}.N", lo=1, hi=64)
    T = F.integer(spec.get("T"), f"{where}.T", lo=1, hi=100_000)
    C = F.integer(spec.get("C"), f"{where}.C", lo=2, hi=10_000)
    scale = F.number(spec.get("scale", 1.0), f"{where}.scale", lo=0)
    logits = rng.normal(size=(N, T, C)) * scale
    if "peaked" not in spec:
        return [log_softmax(x) for x in logits], [None] * N, [None] * N
    margin = F.number(spec["peaked"], f"{where}.peaked", lo=0, lo_open=True)
    L = F.integer(spec.get("L"), f"{where}.L", lo=0, hi=T // 2)
    samples, labels = [], []
    for n in range(N):
        target = tuple(int(k) for k in rng.integers(1, C, size=L))  # blank 0 never drawn
        path = _random_path(rng, target, T)
        x = logits[n].copy()
        x[np.arange(T), path] += margin
        lp = log_softmax(x)
        if path_score(lp, path) <= np.log(0.5):
            fail(f"{where}.peaked", "a margin that gives the planted path probability > 1/2",
                 f"{margin:g} (sample {n}: P(path) = {np.exp(path_score(lp, path)):.3g})")
        assert collapse(path) == target
        samples.append(lp)
        labels.append(target)
    return samples, labels, list(labels)


def _random_path(rng, target, T: int) -> np.ndarray:
    """A path of ``T`` frames collapsing to ``target`` (blank 0): the minimal path with the
    spare frames spread at random over its positions."""
    base = minimal_path(target) or [0]  # an empty target: a path of blanks
    counts = 1 + np.bincount(rng.integers(0, len(base), size=T - len(base)),
                             minlength=len(base))
    return np.repeat(base, counts)


LIBRARY = Library("decoder cases", parse_decoder_case, builtin=FOLDER)


def load_decoder_cases(dirs=None) -> list[DecoderCase]:
    """Every decoder case in ``dirs`` (folders of .toml/.json files, or one folder) or the
    built-in library."""
    return LIBRARY.load(dirs)


def select_decoder_cases(cases: list[DecoderCase], globs) -> list[DecoderCase]:
    """Cases matching any glob by ``name``, ``family/name`` or ``decoders/family/name``; all
    without globs; none where no glob matches (the caller says what it expected)."""
    return select(cases, globs, strict=False)


def describe_decoder_cases(cases: list[DecoderCase]) -> list[dict]:
    """One JSON-ready summary per decoder case, in ``ctcbench cases``' columns: its family
    is ``decoders/<file>``, its oracle what its answers rest on, its dtypes the float64 that
    decoders are given. Oracle "known": answers stated in the file (by hand, or a
    planted path); "exact": computed exactly as the case is judged."""
    return [{"name": c.name, "family": f"{FOLDER}/{c.family}",
             "oracle": "known" if any(x is not None for x in (*c.labels, *c.greedy))
             else "exact", "dtypes": ["float64"], "library": "decoders",
             "description": c.description, "provenance": c.provenance, "source": c.source}
            for c in cases]
