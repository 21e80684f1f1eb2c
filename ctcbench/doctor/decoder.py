"""``check_decoder``: run a user's decode function on their batch beside ctcbench's own, and
name what differs (empty outputs, blanks left in, repeats merged across a blank or not merged,
a shifted blank index, tensors where integers were expected, padding read as frames).

The user's function is called on the values exactly as given (``fn(values, lengths)``, or
``fn(values)`` when it takes one argument); its output may be a list of label sequences (lists,
arrays, tensors, or strings with ``alphabet``), a padded ``(N, S)`` array (``-1`` padding), a
``(sequences, scores)`` pair, or Keras's ``(decoded (paths, N, S), log_probs)``. The right
answer is greedy's (the collapse of the per-frame argmax) or, with ``beam``, the most
probable labelling (brute force where small, else ctcbench's prefix beam of that width).
"""
from __future__ import annotations

import inspect
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from ctcbench.caselib.decoder_judge import BRUTE_FORCE_PATHS, name_fault
from ctcbench.core.arrays import to_numpy
from ctcbench.core.ctcmath import collapse, log_softmax, logsumexp
from ctcbench.core.decoding import labelling_logprob, most_probable, prefix_count
from ctcbench.errors import expect, fail

LAYOUTS = ("TNC", "NTC")


@dataclass
class DecoderCheck:
    """What ``check_decoder`` found: ``findings`` (one line per kind of fault, with how many
    samples show it), ``samples`` (per sample: what it returned and what was right)."""

    findings: list[str]
    samples: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.findings

    def to_dict(self) -> dict:
        return {"ok": self.ok, "findings": self.findings, "notes": self.notes,
                "samples": self.samples}

    def format_table(self) -> str:
        wrong, n = sum(not s["same"] for s in self.samples), len(self.samples)
        head = (f"decoder differs from the reference on {wrong} of {n} samples" if wrong else
                f"decoder agrees with the reference on all {n} samples"
                + ("" if self.ok else ", but:"))
        return "\n".join([head, *(f"  - {f}" for f in self.findings),
                          *(f"  note: {n}" for n in self.notes)])


def check_decoder(fn, values, lengths=None, *, blank: int = 0, layout: str = "TNC",
                  beam: int | None = None, alphabet=None) -> DecoderCheck:
    """Run ``fn`` (the user's decoder) on ``values`` (log-probs, probs or logits, in
    ``layout``) and ``lengths (N,)`` (default: every frame), and compare with ctcbench's.
    ``beam``: the user's decoder is a beam search of that width (default: greedy);
    ``alphabet``: class index -> character, for a decoder that returns strings."""
    expect(callable(fn), "fn", "the user's decode function", type(fn).__name__)
    expect(layout in LAYOUTS, "layout", f"one of {', '.join(LAYOUTS)}", repr(layout))
    x = np.asarray(to_numpy(values, "values")[0], dtype=np.float64)
    expect(x.ndim == 3, "values", f"a 3-D array in {layout} layout", f"shape {x.shape}")
    x = x if layout == "TNC" else x.transpose(1, 0, 2)  # (T, N, C)
    T, N, C = x.shape
    lengths_given = lengths
    given = None if lengths is None else np.asarray(to_numpy(lengths, "lengths")[0]).reshape(-1)
    expect(given is None or (given.dtype.kind in "iub" or bool(np.all(given == np.round(given)))),
           "lengths", "whole frame counts", None if given is None else given.tolist()[:8])
    lengths = np.full(N, T) if given is None else given.astype(np.int64)
    expect(len(lengths) == N and bool(((lengths >= 0) & (lengths <= T)).all()), "lengths",
           f"{N} frame counts in [0, {T}]", lengths.tolist()[:8])
    expect(0 <= blank < C, "blank", f"a class index in [0, {C})", repr(blank))
    lp, kind = _log_probs(x)
    out = _call(fn, values, lengths_given, lengths)
    seqs, notes = _sequences(out, N, alphabet, C)
    if kind == "logits":
        notes.append("values are unnormalised logits: the reference read them log-softmaxed")
    faults, samples = Counter(), []
    first = {}
    for n in range(N):
        frames = lp[:lengths[n], n]  # (T_n, C)
        want, how = _right_answer(frames, blank, beam)
        got = seqs[n]
        if want is None:  # only what any decoder must do: no blank, labels in range
            want = got if blank not in got and all(0 <= k < C for k in got) else greedy_of(
                frames, blank)
        same = got == want or (beam is not None and _as_likely(frames, got, want, blank))
        fault = None if same else name_fault(got, want, frames, blank)
        if fault is not None:
            kind_of = fault.split(":")[0]
            faults[kind_of] += 1
            first.setdefault(kind_of, (n, fault))
        samples.append({"sample": n, "got": list(got), "expected": list(want), "same": same,
                        "answer_by": how, "fault": fault})
    findings = [f"{kind_of} in {count} of {N} samples (first: sample {first[kind_of][0]}, "
                f"{first[kind_of][1].split(': ', 1)[-1]})" for kind_of, count in faults.items()]
    if any("tensor" in note for note in notes):
        findings.insert(0, next(note for note in notes if "tensor" in note))
        notes = [note for note in notes if "tensor" not in note]
    return DecoderCheck(findings, samples, notes)


def greedy_of(frames: np.ndarray, blank: int) -> tuple[int, ...]:
    return collapse(frames.argmax(1), blank=blank)


def _log_probs(x: np.ndarray) -> tuple[np.ndarray, str]:
    """``(log-probs (T, N, C), what the values were)``: log-probs, probs or logits."""
    if np.isnan(x).any() or np.isposinf(x).any():
        fail("values", "finite numbers (or -inf log-probabilities)", "NaN or +inf entries")
    with np.errstate(divide="ignore"):
        if (x >= 0).all() and np.allclose(x.sum(-1), 1.0, atol=1e-3):
            return np.log(x / x.sum(-1, keepdims=True)), "probs"
    if np.allclose(logsumexp(x, axis=-1), 0.0, atol=1e-3):
        return log_softmax(x), "log-probs"
    return log_softmax(x), "logits"


def _call(fn, values, lengths, every_frame):
    """``fn(values, lengths)``, or ``fn(values)`` for a function of one argument; a function
    that needs lengths the user did not give gets every frame of each sample."""
    try:
        params = list(inspect.signature(fn).parameters.values())
        two = any(p.kind is p.VAR_POSITIONAL for p in params) or sum(
            p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in params) >= 2
    except (TypeError, ValueError):  # no signature to read (a builtin): give what was given
        two = lengths is not None
    args = (values, every_frame if lengths is None else lengths) if two else (values,)
    try:
        return fn(*args)
    except Exception as exc:
        fail("decoder", "a function that decodes the batch it is given",
             f"it raised {type(exc).__name__}: {exc}"[:400])


def _sequences(out, N: int, alphabet, C: int) -> tuple[list[tuple[int, ...]], list[str]]:
    """The decoder's output as ``N`` label tuples, and what had to be unwrapped to get them."""
    notes = []
    if isinstance(out, tuple) and len(out) == 2 and not isinstance(out[0], str):
        first = _array_or_none(out[0])
        if first is not None and first.ndim == 3:  # keras.ops.ctc_decode: (paths, N, S)
            out, notes = first[0], ["read the first path of a (paths, N, S) array"]
        elif _length(out[0]) == N and _length(out[1]) == N:  # (sequences, scores)
            out = out[0]
    expect(_length(out) == N, "decoder output", f"one label sequence per sample ({N})",
           f"{type(out).__name__} of {_length(out)}")
    array = _array_or_none(out)
    if array is not None and array.ndim == 2 and array.dtype.kind in "iu":
        notes.append("a padded (N, S) array: -1 entries read as padding")
        rows = [tuple(int(k) for k in row if k != -1) for row in array]
    else:
        rows = [_labels(item, n, alphabet, C, notes) for n, item in enumerate(out)]
    return rows, list(dict.fromkeys(notes))


def _labels(item, n: int, alphabet, C: int, notes: list) -> tuple[int, ...]:
    if isinstance(item, str):
        expect(alphabet is not None, f"decoder output[{n}]", "label indices (or pass "
               "alphabet= to read strings)", repr(item[:20]))
        index = {ch: k for k, ch in enumerate(alphabet)}
        bad = [ch for ch in item if ch not in index]
        expect(not bad, f"decoder output[{n}]", "characters of the alphabet", repr(bad[:5]))
        return tuple(index[ch] for ch in item)
    if not isinstance(item, (list, tuple)):
        array = _array_or_none(item)
        expect(array is not None and array.ndim <= 1, f"decoder output[{n}]",
               "a sequence of label indices", type(item).__name__)
        if type(item).__module__.split(".")[0] not in ("numpy", "builtins"):
            notes.append("tensors returned where integers were expected: each sample's "
                         f"labels are a {type(item).__name__} (convert with .tolist())")
        return tuple(int(k) for k in array.reshape(-1))
    tensors = [k for k in item if not isinstance(k, (int, np.integer)) or isinstance(k, bool)]
    if tensors:
        notes.append("tensors returned where integers were expected: labels are "
                     f"{type(tensors[0]).__name__} (use int(label) or .tolist())")
    try:
        return tuple(int(k) for k in item)
    except (TypeError, ValueError):
        fail(f"decoder output[{n}]", "label indices", repr(list(item)[:5]))


def _array_or_none(x):
    try:
        return np.asarray(to_numpy(x, "decoder output")[0])
    except Exception:
        return None


def _length(x):
    try:
        return len(x)
    except TypeError:
        return None


def _right_answer(frames: np.ndarray, blank: int, beam):
    """``(the labelling the decoder must return or None, how that is known)``, by the
    judge's rules (``ctcbench.caselib.decoder_judge``): greedy's answer; for a beam, the
    most probable labelling where its best path alone has probability above 1/2 (no beam can
    lose it) or where the beam holds every prefix (brute force), else none is required."""
    greedy = collapse(frames.argmax(1), blank=blank)
    if beam is None:
        return greedy, "greedy (the collapse of the per-frame argmax)"
    T, C = frames.shape
    if frames.max(1).sum() > np.log(0.5):
        return greedy, "its best path alone has probability > 1/2"
    if C ** T <= BRUTE_FORCE_PATHS and beam >= prefix_count(T, C):
        return min(most_probable(frames, blank=blank)[0]), \
            f"brute force (a beam of {beam} holds every prefix)"
    return None, f"no answer required of a beam of {beam} here"


def _as_likely(frames, got, want, blank) -> bool:
    """A beam's answer that is as probable as the reference's (a tie, or a better find)."""
    if blank in got:
        return False
    a, b = labelling_logprob(frames, [got, want], blank=blank)
    return bool(a >= b - 1e-9 * (1 + abs(b)))


def load_decoder(target: str, option: str = "--decoder"):
    """The function at ``target`` (``"pkg.mod:name"``), imported here with the current folder
    on the path (as ``python -m`` does); one error naming ``option`` for anything wrong."""
    import importlib
    import os
    import sys

    from ctcbench.runtime.functions import TARGET
    expect(isinstance(target, str) and bool(TARGET.fullmatch(target)), option,
           "PKG.MOD:NAME, a module path, a colon and a function name (e.g. mypkg.ocr:decode)",
           repr(target))
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    module_name, _, attr = target.partition(":")
    try:
        obj = importlib.import_module(module_name)
    except Exception as exc:
        fail(option, f"a module {module_name!r} that imports (the current folder is on the "
             "path)", f"{type(exc).__name__}: {exc}"[:300])
    for part in attr.split("."):
        expect(hasattr(obj, part), option, f"a function {attr!r} in {module_name}",
               f"no attribute {part!r}")
        obj = getattr(obj, part)
    expect(callable(obj), option, "a function", f"{target} is a {type(obj).__name__}")
    return obj


def examine_decoder(file, target: str, *, blank=None, layout: str = "TNC", beam=None,
                    alphabet=None, max_bytes=None) -> DecoderCheck:
    """``ctcbench doctor FILE --decoder PKG.MOD:NAME``: the values (and input_lengths, where
    FILE has them) read from FILE, the user's decoder run on them and checked."""
    from ctcbench.doctor.load import load_inputs
    fn = load_decoder(target)
    inputs = load_inputs(file, required=(),
                         **({} if max_bytes is None else {"max_bytes": max_bytes}))
    values = next(inputs[k] for k in ("log_probs", "logits", "probs") if k in inputs)
    return check_decoder(fn, values, inputs.get("input_lengths"),
                         blank=inputs.get("blank", 0) if blank is None else blank,
                         layout=layout, beam=beam, alphabet=alphabet)
