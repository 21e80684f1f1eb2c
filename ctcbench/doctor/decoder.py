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

from ctcbench.backends.decoders.wav2vec2 import TokenizerDecode, tokenizer_of
from ctcbench.caselib.decoder_judge import (BRUTE_FORCE_PATHS, most_probable_known, name_fault,
                                            padding_message, reads_padding, score_findings)
from ctcbench.core.arrays import to_numpy
from ctcbench.core.ctcmath import collapse, log_softmax, logsumexp
from ctcbench.core.decoding import labelling_logprob, most_probable, prefix_count
from ctcbench.core.layouts import LAYOUTS
from ctcbench.doctor.config import DEFAULTS
from ctcbench.errors import expect, fail


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

    @property
    def judged(self) -> int:
        """Samples held to something beyond what any decoder must do: a required answer, or
        the declared kind of score."""
        return sum(s["judged"] for s in self.samples)

    def summary(self) -> str:
        """How many samples were judged (by their labels, or by their scores only), how many
        of them are wrong, and why the others were not judged: agreement is never claimed on
        a sample that was not judged."""
        n, judged = len(self.samples), self.judged
        wrong = sum(s["fault"] is not None for s in self.samples)
        why = Counter(s["answer_by"] for s in self.samples if not s["judged"])
        scores_only = sum(s["judged"] and not s["labels_judged"] for s in self.samples)
        skipped = "; ".join(f"{count} not judged: {reason}" if judged else reason
                            for reason, count in why.items())
        if not judged:
            return f"no sample judged of {n}: {skipped}" if n else "no sample"
        head = (f"decoder differs from the reference on {wrong} of the {judged} samples judged"
                if wrong else f"decoder agrees with the reference on all {judged} samples "
                f"judged")
        parts = [f"{scores_only} of them by their scores only"] if scores_only else []
        parts += [f"of {n}; {skipped}"] if skipped else []
        return head + (f" ({'; '.join(parts)})" if parts else "")

    def to_dict(self) -> dict:
        return {"ok": self.ok, "summary": self.summary(), "judged": self.judged,
                "findings": self.findings, "notes": self.notes, "samples": self.samples}

    def format_table(self) -> str:
        return "\n".join([self.summary(), *(f"  - {f}" for f in self.findings),
                          *(f"  note: {n}" for n in self.notes)])


def check_decoder(fn, values, lengths=None, *, blank: int | None = None,
                  layout: str = DEFAULTS.layout, beam: int | None = None, alphabet=None,
                  score: str | None = None) -> DecoderCheck:
    """Run ``fn`` (the user's decoder) on ``values`` (log-probs, probs or logits, in
    ``layout``) and ``lengths (N,)`` (default: every frame), and compare with ctcbench's.
    ``fn`` may also be a Transformers CTC tokenizer or processor (``Wav2Vec2CTCTokenizer``,
    ``Wav2Vec2Processor``), or ``functools.partial(processor.batch_decode, **settings)``: its
    ``batch_decode`` runs on each sample's argmax cut to its length, its text is read back
    through its vocabulary, and what its conventions (word delimiter, ``group_tokens``) make
    of the right answer is a note, not a finding. ``blank``: default 0, or the tokenizer's
    pad token, its CTC blank.
    ``beam``: the user's decoder is a beam search of that width (default: greedy);
    ``alphabet``: class index -> character, for a decoder that returns strings; ``score``:
    what the scores of a ``(sequences, scores)`` output are, ``labelling`` (log P(labels),
    summed over all its paths) or ``path`` (the best single path's log-prob), checked so."""
    hf = tokenizer_of(fn)
    expect(hf is not None or callable(fn), "fn", "the user's decode function (or a CTC "
           "tokenizer or processor)", type(fn).__name__)
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
    tokenizer = None if hf is None else TokenizerDecode(*hf)
    pad_mismatch = tokenizer is not None and blank is not None and blank != tokenizer.blank
    blank = (0 if tokenizer is None else tokenizer.blank) if blank is None else blank
    expect(0 <= blank < C, "blank", f"a class index in [0, {C})", repr(blank))
    expect(score in (None, "labelling", "path"), "score", "labelling, path or None", repr(score))
    lp, kind = _log_probs(x)
    if tokenizer is not None:
        def fn(values, lengths):  # (N, T, C), the layout Transformers' logits have
            return tokenizer(x.transpose(1, 0, 2), lengths)
    out = _call(fn, values, lengths_given, lengths)
    scores = _scores(out, N) if score is not None else None
    seqs, notes = _sequences(out, N, alphabet, C)
    if score is not None and scores is None:
        notes.append(f"score={score!r} given, but the output holds no scores: "
                     "return (sequences, scores) to have them checked")
    if kind == "logits":
        notes.append("values are unnormalised logits: the reference read them log-softmaxed")
    faults, samples, conventions = Counter(), [], Counter()
    first = {}
    for n in range(N):
        frames = lp[:lengths[n], n]  # (T_n, C)
        want, how = _right_answer(frames, blank, beam)
        got, judged = seqs[n], want is not None
        if want is None:  # only what any decoder must do: no blank, labels in range
            want = got if blank not in got and all(0 <= k < C for k in got) else greedy_of(
                frames, blank)
        same = got == want or (beam is not None and _as_likely(frames, got, want, blank))
        fault = None
        if lengths[n] < T and reads_padding(got, frames, lp[:, n], blank,
                                            _known(frames, blank, beam), beam=beam):
            fault = padding_message(got, frames, lp[:, n], blank, _known(frames, blank, beam))
            same = False
        elif not same:
            fault = name_fault(got, want, frames, blank)
            convention = _convention(tokenizer, got, want, frames.argmax(1))
            if convention is not None:
                fault, same = None, True
                conventions[convention] += 1
        elif scores is not None and scores[n] is not None and blank not in got:  # its score
            full = beam is None or beam >= prefix_count(len(frames), C)  # nothing pruned
            found = score_findings(score, frames, blank, [got], [scores[n]], "float32",
                                   beam is not None and full, full=full)
            fault = found[0].message if found else None
        if fault is not None:
            kind_of = fault.split(": ")[0] if ": " in fault else "a different labelling"
            faults[kind_of] += 1
            first.setdefault(kind_of, (n, fault))
        scored = scores is not None and scores[n] is not None and blank not in got
        samples.append({"sample": n, "got": list(got), "expected": list(want), "same": same,
                        "judged": judged or scored or fault is not None,
                        "labels_judged": judged or (fault is not None and not scored),
                        "answer_by": how, "fault": fault})
    findings = [f"{kind_of} in {count} of {N} samples (first: sample {first[kind_of][0]}, "
                f"{first[kind_of][1].split(': ', 1)[-1]})" for kind_of, count in faults.items()]
    if not any(s["labels_judged"] for s in samples) and N:
        notes.append("no sample had a required answer: pass a wider beam (one of "
                     "prefix_count(T, C) holds every prefix where C**T is small) or samples "
                     "whose best path has probability above 1/2, to have answers judged")
    notes += [f"a convention of the tokenizer, not a fault, in {count} of {N} samples: {what}"
              for what, count in conventions.items()]
    if tokenizer is not None and tokenizer.fault() and findings:
        findings.insert(0, tokenizer.fault())
    if pad_mismatch:
        findings.insert(0, f"blank: the tokenizer decodes with its pad token "
                        f"{tokenizer.tokenizer.pad_token!r} (class {tokenizer.blank}) as the CTC "
                        f"blank, not class {blank}: pass blank={tokenizer.blank} if the model's "
                        f"blank is the pad token, else make the blank's token the tokenizer's "
                        f"pad_token (and the model config's pad_token_id)")
    if any("tensor" in note for note in notes):
        findings.insert(0, next(note for note in notes if "tensor" in note))
        notes = [note for note in notes if "tensor" not in note]
    return DecoderCheck(findings, samples, notes)


def _convention(tokenizer, got, want, argmax) -> str | None:
    """Which of the tokenizer's conventions (one, or all of them in order) turn the right
    answer ``want`` into ``got``: the text of the first that does, or None."""
    found = tokenizer.conventions() if tokenizer is not None else []
    for chosen in [[c] for c in found] + ([found] if len(found) > 1 else []):
        made = tuple(want)
        for _, change in chosen:
            made = change(made, tuple(int(k) for k in argmax))
        if made == tuple(got):
            return "; ".join(what for what, _ in chosen)
    return None


def _known(frames: np.ndarray, blank: int, beam):
    """The sample's most probable labellings where brute force gives them to a beam."""
    if beam is None:
        return None
    return most_probable_known(frames, blank, None)


def _scores(out, N: int):
    """Per sample the score of a ``(sequences, scores)`` output (the first of a row), or
    None when the output carries none."""
    if not (isinstance(out, tuple) and len(out) == 2 and _length(out[1]) == N):
        return None
    first = _array_or_none(out[0])
    if first is not None and first.ndim == 3:  # keras' (decoded, log_probs): not log P
        return None
    values = []
    for row in out[1]:
        array = _array_or_none(row)
        if array is None or array.size == 0 or array.dtype.kind not in "fiu":
            values.append(None)
        else:
            values.append(float(array.reshape(-1)[0]))
    return values


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
    return None, (f"no answer is required of a beam of {beam} where the best path has "
                  f"probability <= 1/2 and the beam does not hold every prefix (or C**T is "
                  f"over {BRUTE_FORCE_PATHS} for brute force)")


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


def examine_decoder(file, target: str, *, blank=DEFAULTS.blank, layout: str = DEFAULTS.layout,
                    beam=DEFAULTS.beam, alphabet=DEFAULTS.alphabet,
                    max_bytes: int = DEFAULTS.max_bytes) -> DecoderCheck:
    """``ctcbench doctor FILE --decoder PKG.MOD:NAME``: the values (and input_lengths, where
    FILE has them) read from FILE, the user's decoder run on them and checked."""
    from ctcbench.doctor.load import load_inputs
    fn = load_decoder(target)
    inputs = load_inputs(file, required=(), max_bytes=max_bytes)
    values = next(inputs[k] for k in ("log_probs", "logits", "probs") if k in inputs)
    return check_decoder(fn, values, inputs.get("input_lengths"),
                         blank=inputs.get("blank", 0) if blank is None else blank,
                         layout=layout, beam=beam, alphabet=alphabet)
