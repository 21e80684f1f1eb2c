"""``ctcbench datasheet --decoder NAME``: what a decoder does with malformed and unusual input.

Each probe changes one thing of a valid batch (two samples of ``T`` frames of normalised
log-probabilities over ``C`` classes, the blank 0, a beam of 4) and is handed to the decoder
through a worker process (``ctcbench.runtime.worker``'s ``call``), so a crash or a hang costs
one probe. The reactions are the loss probes' (``ctcbench.runtime.malformed.Reaction``):
``raises``, ``crashes``, ``hangs``, or ``returns``, where ``sane`` says whether the answer is
right: for an input with an answer (a sample of no frames, an empty batch, a class of
probability 0, a vocabulary of the blank alone) it must equal ctcbench's own decoding of it;
for one without (NaN frames, a length past T or below 0, a blank index outside [0, C), a
beam of 0) no answer is.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ctcbench.core.ctcmath import collapse, log_softmax
from ctcbench.core.decoding import best_path_score, most_probable, path_score
from ctcbench.runtime.decoders import get_decoder
from ctcbench.runtime.malformed import Reaction
from ctcbench.runtime.protocol import BackendCrashed, BackendTimeout

T, C, BEAM = 6, 4, 4


def valid_batch() -> dict:
    rng = np.random.default_rng(0)
    return {"log_probs": log_softmax(rng.normal(size=(T, 2, C)) * 2),
            "lengths": np.array([T, T - 2], dtype=np.int64), "blank": 0, "beam": BEAM}


def _set(field: str, index, value):
    def change(b):
        b[field] = np.array(b[field], copy=True)
        b[field][index] = value
        return b
    return change


def _with(**values):
    def change(b):
        return {**b, **values}
    return change


def _classes(n: int):
    def change(b):
        return {**b, "log_probs": log_softmax(b["log_probs"][:, :, :n] * 1.0)}
    return change


def _batch(n: int):
    def change(b):
        return {**b, "log_probs": b["log_probs"][:, :n], "lengths": b["lengths"][:n]}
    return change


def _impossible(b):  # class 2 has probability 0 in every frame
    x = b["log_probs"].copy()
    x[:, :, 2] = -np.inf
    return {**b, "log_probs": log_softmax(x)}


@dataclass(frozen=True)
class DecoderProbe:
    name: str
    what: str
    change: Callable[[dict], dict]
    has_answer: bool
    searches: tuple[str, ...] = ("greedy", "beam")  # the decoders it applies to


PROBES: tuple[DecoderProbe, ...] = (
    DecoderProbe("NaN in a valid frame", "log_probs[1, 0, 2] = NaN",
                 _set("log_probs", (1, 0, 2), np.nan), False),
    DecoderProbe("length > T", f"lengths[0] = {T + 3}, frames T = {T}",
                 _set("lengths", 0, T + 3), False),
    DecoderProbe("negative length", "lengths[0] = -1", _set("lengths", 0, -1), False),
    DecoderProbe("blank = C", f"blank = {C} with C = {C}", _with(blank=C), False),
    DecoderProbe("beam 0", "beam = 0", _with(beam=0), False, ("beam",)),
    DecoderProbe("no frames", "lengths[1] = 0: the empty labelling",
                 _set("lengths", 1, 0), True),
    DecoderProbe("empty batch", "N = 0: no hypotheses", _batch(0), True),
    DecoderProbe("probability 0", "class 2 at -inf in every frame", _impossible, True),
    DecoderProbe("blank alone", "C = 1, the blank only: empty labellings", _classes(1), True),
    DecoderProbe("blank last", f"blank = {C - 1}", _with(blank=C - 1), True),
)


def valid_alignment() -> dict:
    rng = np.random.default_rng(1)
    return {"log_probs": log_softmax(rng.normal(size=(T, C)) * 2),
            "target": np.array([1, 2, 2], dtype=np.int64), "blank": 0}


ALIGNER_PROBES: tuple[DecoderProbe, ...] = (
    DecoderProbe("NaN in a frame", "log_probs[1, 2] = NaN", _set("log_probs", (1, 2), np.nan),
                 False),
    DecoderProbe("label = blank", "target [1, 0, 2], 0 the blank", _set("target", 1, 0), False),
    DecoderProbe("label >= C", f"target [1, {C}, 2] with C = {C}", _set("target", 1, C), False),
    DecoderProbe("negative label", "target [1, -1, 2]", _set("target", 1, -1), False),
    DecoderProbe("target too long", f"target of {T} labels in {T} frames, two repeats",
                 _with(target=np.array([1, 1, 2, 2, 3, 3])), False),
    DecoderProbe("blank = C", f"blank = {C} with C = {C}", _with(blank=C), False),
    DecoderProbe("empty target", "target []: the all-blank path",
                 _with(target=np.zeros(0, dtype=np.int64)), True),
    DecoderProbe("one path", f"target of {T} distinct labels in {T} frames",
                 _with(target=np.array([1, 2, 3, 1, 2, 3])), True),
    DecoderProbe("blank last", f"blank = {C - 1}, target [1, 2, 2]", _with(blank=C - 1), True),
)


def probe_decoder(name: str) -> list[dict]:
    """One row per probe: ``probe``, ``status`` (a ``Reaction``), ``sane``, ``detail``; the
    decoder runs in a worker whatever its trait says, so a crash stays there."""
    decoder = get_decoder(name, isolated=True)
    aligner = decoder.traits.role == "aligner"
    rows = []
    try:
        for probe in ALIGNER_PROBES if aligner else PROBES:
            if not aligner and decoder.traits.search not in probe.searches:
                continue
            rows.append({"decoder": name, "probe": probe.name, "what": probe.what,
                         **(_aligned(decoder, probe) if aligner else _one(decoder, probe))})
    finally:
        decoder.close()
    return rows


def _called(call) -> tuple[object, dict | None]:
    """``(what call() returned, None)``, or ``(None, the row of how it failed)``."""
    try:
        return call(), None
    except BackendCrashed as exc:
        return None, {"status": Reaction.CRASHES, "sane": False, "detail": str(exc)[:300]}
    except BackendTimeout as exc:
        return None, {"status": Reaction.HANGS, "sane": False, "detail": str(exc)[:300]}
    except Exception as exc:
        return None, {"status": Reaction.RAISES, "sane": None,
                      "detail": f"{type(exc).__name__}: {exc}"[:300]}


def _aligned(aligner, probe: DecoderProbe) -> dict:
    b = probe.change(valid_alignment())
    got, failed = _called(lambda: aligner.align(b["log_probs"], b["target"], blank=b["blank"]))
    if failed:
        return failed
    path, score = got
    best = best_path_score(b["log_probs"], b["target"], blank=b["blank"])
    sane = (probe.has_answer and collapse(path, blank=b["blank"]) == tuple(b["target"])
            and len(path) == T and abs(path_score(b["log_probs"], path) - best) < 1e-6)
    return {"status": Reaction.RETURNS, "sane": bool(sane),
            "detail": f"returned the path {list(path)}, score {score:.6g}"}


def _one(decoder, probe: DecoderProbe) -> dict:
    b = probe.change(valid_batch())
    got, failed = _called(lambda: decoder.decode(b["log_probs"], b["lengths"], blank=b["blank"],
                                                 beam=b["beam"]))
    if failed:
        return failed
    if not probe.has_answer:
        return {"status": Reaction.RETURNS, "sane": False, "detail": f"returned {str(got)[:200]}"}
    want = [_right(b["log_probs"][:int(n), i], b["blank"], decoder.traits.search)
            for i, n in enumerate(b["lengths"])]
    firsts = [hyps[0].labels if hyps else None for hyps in got]
    sane = len(got) == len(want) and all(f in w for f, w in zip(firsts, want))
    return {"status": Reaction.RETURNS, "sane": bool(sane),
            "detail": f"returned {[list(f) if f is not None else None for f in firsts]}"
                      + ("" if sane else f", expected {[sorted(w) for w in want]}")}


def _right(frames: np.ndarray, blank: int, search: str) -> set:
    """The right first answers for one sample: greedy's, or the most probable labellings."""
    if len(frames) == 0:
        return {()}
    if search == "greedy":
        return {collapse(frames.argmax(-1), blank=blank)}
    return most_probable(frames, blank=blank)[0]


def sheet_text(rows: list[dict]) -> str:
    """Probes down, decoders across, each cell the reaction in a word."""
    from ctcbench.runtime.malformed import verdict
    names = list(dict.fromkeys(r["decoder"] for r in rows))
    probes = list(dict.fromkeys(r["probe"] for r in rows))
    cell = {(r["decoder"], r["probe"]): verdict(r)[0] for r in rows}
    cell.update({(n, p): "-" for n in names for p in probes if (n, p) not in cell})  # n/a
    width = max(len(p) for p in probes)
    cols = [max(len(n), *(len(cell[n, p]) for p in probes)) for n in names]
    lines = [" " * width + "  " + "  ".join(n.ljust(w) for n, w in zip(names, cols))]
    for p in probes:
        lines.append(p.ljust(width) + "  " + "  ".join(cell[n, p].ljust(w)
                                                       for n, w in zip(names, cols)))
    return "\n".join(line.rstrip() for line in lines)
