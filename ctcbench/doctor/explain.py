"""Why a "perfect" prediction can score worse than all-blank: the losses under each mistake.

For the user's shapes, targets and lengths, two confident predictions are built:
  * all-blank: the blank has probability ``confidence`` on every frame;
  * perfect: the frames follow one alignment of the target (one-frame label spikes, evenly
    spaced, blank elsewhere), each with probability ``confidence``.
Both are scored by the NumPy reference under the correct conventions and under each common
mistake (probabilities or raw scores passed as log-probabilities, a double softmax, the
model's blank at the other end of the classes). Under correct conventions the perfect
prediction always wins; the rows where it does not show which mistake inverts the ordering.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np

from ctcbench.core.ctcmath import log_softmax, minimal_path
from ctcbench.doctor.config import DEFAULTS
from ctcbench.doctor.diagnose import diagnose
from ctcbench.doctor.findings import Code
from ctcbench.doctor.inputs import Inputs, prepare
from ctcbench.doctor.losses import MAX_LOSS_SAMPLES, reference_losses, usable_samples
from ctcbench.progress import Progress


@dataclass
class Scenario:
    """One way of handing the two predictions to the loss, and the mean losses it gives."""

    name: str
    description: str
    loss_all_blank: float
    loss_perfect: float
    inverted: bool  # the perfect prediction does not score lower than all-blank
    yours: bool  # the doctor found this mistake in the user's inputs


@dataclass
class Explanation:
    scenarios: list[Scenario]
    samples: int  # samples used (targets that fit their input length)
    confidence: float
    summary: dict

    def to_dict(self) -> dict:
        return {"summary": self.summary, "samples": self.samples, "confidence": self.confidence,
                "scenarios": [asdict(s) for s in self.scenarios]}

    def format_table(self) -> str:
        s = self.summary
        lines = [f"perfect vs all-blank: T={s['T']} C={s['C']} blank={s['blank']}, "
                 f"{self.samples} samples, confidence {self.confidence:g}; "
                 "mean per-sample CTC loss (reduction='none')",
                 "",
                 f"  {'scenario':<24}{'all-blank':>12}{'perfect':>12}  ordering"]
        for sc in self.scenarios:
            order = "INVERTED" if sc.inverted else "ok"
            mark = "  <- your inputs" if sc.yours else ""
            lines.append(f"  {sc.name:<24}{sc.loss_all_blank:>12.4g}{sc.loss_perfect:>12.4g}  "
                         f"{order}{mark}")
        lines.append("")
        for sc in self.scenarios:
            lines.append(f"  {sc.name}: {sc.description}")
        inverting = [sc.name for sc in self.scenarios if sc.inverted]
        lines.append("")
        lines.append("the ordering is inverted by: " + (", ".join(inverting) or "none of these"))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format_table()


def alignment_paths(inp: Inputs, samples: np.ndarray, blank: int) -> np.ndarray:
    """``(T, n)`` class per frame of one alignment of each chosen target.

    Like a trained CTC model: each label is a one-frame spike, spikes evenly spaced, blank
    elsewhere (when the input has at least 2 frames per label). Shorter inputs get the minimal
    path (labels, a blank between adjacent repeats) stretched evenly over the valid frames.
    Frames past the input length are blank.
    """
    T = inp.shape[0]
    idx = np.flatnonzero(samples)
    paths = np.full((T, len(idx)), blank, dtype=np.int64)
    for j, n in enumerate(idx):
        labels = inp.targets[n, : inp.target_lengths[n]].tolist()
        length = int(inp.lengths[n])
        if not labels:
            continue
        if length >= 2 * len(labels):  # spikes at least 2 frames apart: repeats stay apart
            at = [int((k + 0.5) * length / len(labels)) for k in range(len(labels))]
            paths[at, j] = labels
            continue
        minimal = minimal_path(labels, blank=blank)
        # frame t shows element floor(t * len / length): every element gets a frame
        paths[:length, j] = [minimal[t * len(minimal) // length] for t in range(length)]
    return paths


def _confident(paths: np.ndarray, C: int, confidence: float) -> np.ndarray:
    """``(T, n, C)`` probabilities: ``confidence`` on the path's class, the rest spread evenly."""
    probs = np.full(paths.shape + (C,), (1 - confidence) / (C - 1))
    np.put_along_axis(probs, paths[..., None], confidence, axis=-1)
    return probs


def explain_perfect_vs_blank(log_probs=None, *, logits=None, probs=None, targets, input_lengths,
                             target_lengths, blank: int = 0, layout: str = DEFAULTS.layout,
                             confidence: float = 0.99, samples: int = 8) -> Explanation:
    """Score all-blank and perfect predictions for the user's shapes under each convention.

    The values in ``log_probs``/``logits``/``probs`` are only used to find the user's own
    mistake (via :func:`ctcbench.doctor.diagnose`); the predictions are built from the
    shapes, targets and lengths of the first ``samples`` usable samples.
    """
    if not (isinstance(samples, int) and samples >= 1):
        raise ValueError(f"samples: expected a positive int, got {samples!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence: expected a probability in (0, 1), got {confidence}")
    kwargs = dict(logits=logits, probs=probs, targets=targets, input_lengths=input_lengths,
                  target_lengths=target_lengths, blank=blank, layout=layout)
    inp, _ = prepare(log_probs, **kwargs)
    report = diagnose(log_probs, **kwargs)
    T, N, C, L = inp.shape
    if C < 3:
        raise ValueError(f"{inp.kind}: expected at least 3 classes for this comparison, got C={C}")
    by_code = {f.code: f for f in report.findings}
    other = by_code[Code.BLANK_INDEX].evidence["model_blank"] if Code.BLANK_INDEX in by_code \
        else (C - 1 if inp.blank == 0 else 0)
    used = usable_samples(inp) & (inp.target_lengths > 0)
    used &= np.cumsum(used) <= min(samples, MAX_LOSS_SAMPLES)  # the samples scored
    if not used.any():
        raise ValueError("targets: expected at least one non-empty target that fits its input "
                         "length with valid labels, got none")
    b = inp.blank
    perfect = _confident(alignment_paths(inp, used, b), C, confidence)  # (T, n, C)
    all_blank = _confident(np.full(perfect.shape[:2], b), C, confidence)  # (T, n, C)
    margin = np.log(confidence * (C - 1) / (1 - confidence))
    yours = None
    if Code.PROBABILITIES_NOT_LOG in by_code:
        yours = "double softmax" if inp.kind == "logits" else "probs as log_probs"
    elif Code.NOT_NORMALIZED in by_code:
        yours = "raw scores as log_probs"
    elif Code.BLANK_INDEX in by_code:
        yours = f"blank {other} in the model"
    candidates = [
        ("correct", "log_softmax output, one blank index for the model and the loss",
         np.log, b),
        ("probs as log_probs", "softmax output passed as log_probs (no log)",
         lambda p: p, b),
        ("raw scores as log_probs", f"raw scores (margin {margin:.3g} on the chosen class) "
         "passed as log_probs without log_softmax",
         lambda p: np.log(p) - np.log(p).mean(-1, keepdims=True), b),
        ("double softmax", "softmax output passed as logits (log_softmax applied on top)",
         log_softmax, b),
    ]
    scenarios = []
    sub = _subset(inp, used)
    with Progress("scoring", total=len(candidates), unit="scenarios", leave=False) as bar:
        for name, desc, transform, _ in candidates:
            lb = _mean_loss(transform(all_blank), sub, b)
            lp = _mean_loss(transform(perfect), sub, b)
            scenarios.append(Scenario(name, desc, lb, lp, not lp < lb,
                                      yours == name or (yours is None and name == "correct")))
            bar.update()
    # The model's blank at the other end: predictions built with blank `other`, loss with `b`.
    fits = used & usable_samples(inp, blanks=(other,))
    if fits.any():
        sub2 = _subset(inp, fits)
        p2 = np.log(_confident(alignment_paths(inp, fits, other), C, confidence))
        b2 = np.log(_confident(np.full(p2.shape[:2], other), C, confidence))
        name = f"blank {other} in the model"
        lb, lp = _mean_loss(b2, sub2, b), _mean_loss(p2, sub2, b)
        scenarios.append(Scenario(name, f"predictions use blank={other}, the loss blank={b}",
                                  lb, lp, not lp < lb, yours == name))
    summary = {"T": T, "N": N, "C": C, "blank": b, "kind": inp.kind,
               "findings": report.codes}
    return Explanation(scenarios, int(used.sum()), confidence, summary)


def _subset(inp: Inputs, samples: np.ndarray) -> Inputs:
    """The same inputs restricted to ``samples`` (values are not needed)."""
    idx = np.flatnonzero(samples)
    return Inputs(inp.x[:, idx], inp.kind, inp.dtype, inp.targets[idx], inp.input_lengths[idx],
                  inp.target_lengths[idx], inp.blank, inp.layout, inp.reduction, inp.transposed)


def _mean_loss(values: np.ndarray, inp: Inputs, blank: int) -> float:
    return float(np.mean(reference_losses(values, inp, blank, np.ones(inp.shape[1], dtype=bool))))
