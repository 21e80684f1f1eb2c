"""``check_aligner``: run a user's forced aligner on their batch, one sample at a time, and
hold each answer to the exact best path of its target (a max-plus recursion,
``ctcbench.core.decoding.best_path``).

The aligner has the contract's signature, ``align(log_probs (T_n, C) float64, target (L_n,)
int64, *, blank) -> [path (T_n,), score]`` (a bare path is taken too, its score then not
checked); a target with no path in its frames must be refused with an exception. ``fn`` is
a callable, called here, or ``"pkg.mod:name"``, run in a worker process
(``ctcbench.runtime.decoder_functions``), where a segfault or an abort is a finding naming
the sample rather than the end of the check. What is wrong is named by the decoder judge
(``ctcbench.caselib.decoder_judge.judge_alignment``): a path that does not collapse to the
target (class 0 in every frame for an empty target, repeats with no blank between), not the
best path, a score that is not its log-probability, an infeasible target aligned, a
feasible one refused.
"""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from types import SimpleNamespace

import numpy as np

from ctcbench.caselib.decoder_check import broke_contract
from ctcbench.caselib.decoder_judge import Finding as JudgeFinding, judge_alignment
from ctcbench.core.arrays import to_numpy
from ctcbench.core.layouts import LAYOUTS
from ctcbench.doctor.config import DEFAULTS
from ctcbench.doctor.decoder import _log_probs
from ctcbench.errors import InputError, expect, fail
from ctcbench.runtime.protocol import BackendCrashed, BackendTimeout


@dataclass
class AlignerCheck:
    """What ``check_aligner`` found: ``findings`` (one line per kind of fault, with how many
    samples show it), ``samples`` (per sample: the target, the path returned or what was
    raised, the best path's score, the fault)."""

    findings: list[str]
    samples: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def summary(self) -> str:
        n = len(self.samples)
        wrong = sum(s["fault"] is not None for s in self.samples)
        refused = sum(s["refused"] for s in self.samples)
        said = f" ({refused} of them targets with no path, refused as they must be)" \
            if refused else ""
        return (f"aligner differs from the best path on {wrong} of {n} samples" if wrong else
                f"aligner agrees with the best path on all {n} samples{said}")

    def to_dict(self) -> dict:
        return {"ok": self.ok, "summary": self.summary(), "findings": self.findings,
                "notes": self.notes, "samples": self.samples}

    def format_table(self) -> str:
        return "\n".join([self.summary(), *(f"  - {f}" for f in self.findings),
                          *(f"  note: {n}" for n in self.notes)])


def check_aligner(fn, values, targets, lengths=None, target_lengths=None, *, blank: int = 0,
                  layout: str = DEFAULTS.layout, score: str | None = None,
                  option: str = "fn") -> AlignerCheck:
    """Run the aligner ``fn`` (a callable, or ``"pkg.mod:name"`` for a worker process) on
    each sample of ``values`` (log-probs, probs or logits, in ``layout``) with its target:
    ``targets (N, S)`` padded, with ``target_lengths (N,)`` (default: whole rows), or
    concatenated ``(sum L,)`` with ``target_lengths``; ``lengths (N,)`` the frames of each
    sample (default: all). ``score``: what its scores are, ``path`` (the default, or the
    function's ``score`` attribute) or ``none``; ``option``: what an error about ``fn``
    names (``--aligner`` for the doctor's)."""
    expect(layout in LAYOUTS, "layout", f"one of {', '.join(LAYOUTS)}", repr(layout))
    x = np.asarray(to_numpy(values, "values")[0], dtype=np.float64)
    expect(x.ndim == 3, "values", f"a 3-D array in {layout} layout", f"shape {x.shape}")
    x = x if layout == "TNC" else x.transpose(1, 0, 2)  # (T, N, C)
    T, N, C = x.shape
    expect(0 <= blank < C, "blank", f"a class index in [0, {C})", repr(blank))
    frames = _frame_counts(lengths, N, T)
    labels = _targets(targets, target_lengths, N)
    bad = [(n, t.tolist()) for n, t in enumerate(labels)
           if ((t < 0) | (t >= C) | (t == blank)).any()]
    expect(not bad, "targets", f"labels in [0, {C}) other than the blank ({blank})",
           f"sample {bad[0][0]}: {bad[0][1]}" if bad else None)
    lp, kind = _log_probs(x)
    align, declared, close = _aligner(fn, option)
    declared = score if score is not None else declared
    expect(declared in ("path", "none"), "score", "path or none (an aligner's score is its "
           "path's log-prob, or it has none)", repr(declared))
    traits = SimpleNamespace(score=declared, dtype="float32")  # lenient: a user's float32
    notes = ["values are unnormalised logits: the reference read them log-softmaxed"] \
        if kind == "logits" else []
    samples, faults, first = [], Counter(), {}
    try:
        for n in range(N):
            sample, target = lp[:frames[n], n], labels[n]  # (T_n, C), (L_n,)
            got = _outcome(align, sample, target, blank)
            if isinstance(got, BackendCrashed):
                found = [JudgeFinding(n, "crashed", f"T={len(sample)}, L={len(target)}: {got}"[:400])]
            else:
                found = judge_alignment(traits, sample, target, got, blank=blank, n=n)
            fault = found[0].message if found else None
            if fault is not None:
                kind_of = _kind_of(found[0], got)
                faults[kind_of] += 1
                first.setdefault(kind_of, (n, fault))
            raised = isinstance(got, BaseException)
            samples.append({"sample": n, "frames": len(sample), "target": list(target),
                            "path": None if raised else list(got[0]),
                            "raised": f"{type(got).__name__}: {got}"[:300] if raised else None,
                            "refused": raised and not found, "fault": fault})
    except BackendTimeout as exc:  # a hang: stopped at its timeout_s, said in one line
        fail(option, f"an aligner that answers within {exc.timeout_s:g} s (its timeout_s)",
             f"no answer from {fn} on sample {n} (T={len(sample)}); it was stopped")
    except TypeError as exc:  # the contract's complaint about what the aligner returned
        owner = getattr(align, "__self__", None)
        if owner is None or not broke_contract(exc, owner.name):
            raise
        raise InputError(option, f"{str(exc).partition(': ')[2]} (from {owner.name})") from None
    finally:
        close()
    findings = [f"{kind_of} in {count} of {N} samples (first: sample {first[kind_of][0]}, "
                f"{first[kind_of][1]})" for kind_of, count in faults.items()]
    return AlignerCheck(findings, samples, notes)


def _kind_of(finding: JudgeFinding, got) -> str:
    """The line a finding is counted under: its named cause, or what happened."""
    if finding.check == "crashed":
        return f"crashed (the worker died of {got.signal or f'exit code {got.exitcode}'})"
    if finding.check == "raised":
        return "refused a target that has a path"
    return finding.message.split(": ")[0]


def _frame_counts(lengths, N: int, T: int) -> np.ndarray:
    if lengths is None:
        return np.full(N, T)
    given = np.asarray(to_numpy(lengths, "lengths")[0]).reshape(-1)
    expect(given.dtype.kind in "iub" or bool(np.all(given == np.round(given))), "lengths",
           "whole frame counts", given.tolist()[:8])
    given = given.astype(np.int64)
    expect(len(given) == N and bool(((given >= 0) & (given <= T)).all()), "lengths",
           f"{N} frame counts in [0, {T}]", given.tolist()[:8])
    return given


def _targets(targets, target_lengths, N: int) -> list[np.ndarray]:
    """Each sample's target ``(L_n,)`` int64, from padded or concatenated targets."""
    t = np.asarray(to_numpy(targets, "targets")[0])
    expect(t.dtype.kind in "iu", "targets", "integer label indices", str(t.dtype))
    t = t.astype(np.int64)
    if target_lengths is None:
        expect(t.ndim == 2 and len(t) == N, "targets", f"({N}, S) padded targets (or give "
               f"target_lengths)", f"shape {t.shape}")
        return list(t)
    lengths = np.asarray(to_numpy(target_lengths, "target_lengths")[0]).reshape(-1)
    lengths = lengths.astype(np.int64)
    expect(len(lengths) == N and bool((lengths >= 0).all()), "target_lengths",
           f"{N} non-negative lengths", lengths.tolist()[:8])
    if t.ndim == 1:  # concatenated
        expect(len(t) == lengths.sum(), "targets", f"sum(target_lengths) = {lengths.sum()} "
               "concatenated labels", f"{len(t)}")
        return np.split(t, np.cumsum(lengths)[:-1])
    expect(t.ndim == 2 and len(t) == N and bool((lengths <= t.shape[1]).all()), "targets",
           f"({N}, S) padded targets with S >= max(target_lengths)", f"shape {t.shape}")
    return [t[n, :lengths[n]] for n in range(N)]


def _aligner(fn, option: str):
    """``(align(lp, target, blank) -> outcome, the score it declares, close)``."""
    if isinstance(fn, str):
        from ctcbench.runtime.decoder_functions import add_decoder_function
        from ctcbench.runtime.decoders import get_decoder
        name, _ = add_decoder_function(fn, role="aligner", option=option)
        loaded = get_decoder(name)
        return loaded.align, loaded.traits.score, loaded.close
    expect(callable(fn), "fn", "the user's align function, or 'pkg.mod:name'",
           type(fn).__name__)
    return (lambda lp, target, *, blank: _Returned(fn(lp, target, blank=blank))), \
        getattr(fn, "score", "path"), (lambda: None)


class _Returned:
    """What a callable returned, checked against the contract only once the call is over (a
    wrong return is the check's error, never a refusal)."""

    def __init__(self, value):
        self.value = value


def _plain_answer(out):
    """``(path, score)`` from what a callable returned: ``[path, score]`` or a bare path."""
    from ctcbench.runtime.decoder_functions import _plain
    out = _plain(out)
    if isinstance(out, list) and len(out) == 2 and isinstance(out[0], list) and (
            out[1] is None or isinstance(out[1], (int, float))):
        return [int(k) for k in out[0]], out[1]
    expect(isinstance(out, list) and all(isinstance(k, int) for k in out), "aligner output",
           "[path, score] or a path of class indices", repr(out)[:80])
    return out, None


def _outcome(align, lp, target, blank):
    """What the aligner gave: ``(path, score)``, or the exception it raised (a refusal, or a
    BackendCrashed from its worker). A hang is no outcome: BackendTimeout goes up."""
    try:
        got = align(lp, target, blank=blank)
    except BackendTimeout:
        raise
    except Exception as exc:
        if broke_contract(exc, getattr(align, "__self__", None) and align.__self__.name):
            raise
        return exc
    return _plain_answer(got.value) if isinstance(got, _Returned) else got


def examine_aligner(file, target: str, *, blank=DEFAULTS.blank, layout: str = DEFAULTS.layout,
                    max_bytes: int = DEFAULTS.max_bytes) -> AlignerCheck:
    """``ctcbench doctor FILE --aligner PKG.MOD:NAME``: the values, targets (and lengths,
    where FILE has them) read from FILE, the user's aligner run on each sample in a worker
    process and checked."""
    from ctcbench.doctor.load import load_inputs
    inputs = load_inputs(file, required=("targets",), max_bytes=max_bytes)
    values = next(inputs[k] for k in ("log_probs", "logits", "probs") if k in inputs)
    return check_aligner(target, values, inputs["targets"], inputs.get("input_lengths"),
                         inputs.get("target_lengths"),
                         blank=inputs.get("blank", 0) if blank is None else blank,
                         layout=layout, option="--aligner")
