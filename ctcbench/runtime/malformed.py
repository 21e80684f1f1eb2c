"""Malformed and unusual inputs to a backend's own framework call (its ``raw_ctc`` hook, in a
worker process): what ``CTCProblem`` would refuse, and valid inputs in conventions frameworks
get wrong (another dtype, an empty target, the blank last). The datasheet's robustness stage
runs every probe; an atlas entry names the probe that shows its bug.

Each probe changes one thing of a valid batch of two samples. What happened is one of
  raises         the framework raised an error (good: the user hears of the mistake);
  crashes        the worker died (a signal, an exit code);
  hangs          no answer within the timeout;
  returns        a value came back; ``sane`` says whether it is a right answer:
                 for an input with no answer (a negative length, a label >= C) no value is;
                 for one with an answer (NaN frames, an empty batch, an infeasible target)
                 the value must be it;
  not expressible  the framework's API has no way to say it (optax takes paddings, not
                 lengths), so it cannot go wrong there;
  not tested     the backend has no ``raw_ctc`` hook.
Where a gradient came back, ``grad`` says what it is on the first sample's valid frames:
``nan`` (a NaN in it), ``zero`` or ``nonzero``.
"""
from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Callable

import numpy as np

from ctcbench.core.problem import CTCProblem
from ctcbench.runtime.protocol import BackendCrashed, BackendTimeout, UnsupportedProblem
from ctcbench.runtime.registry import REFERENCE, get_backend

T, C, S = 6, 5, 3  # the valid batch: 6 frames, 5 classes, targets padded to 3


def valid_batch() -> dict:
    """Two samples, both valid: logits ``(T, 2, C)`` float32, targets ``(2, S)`` int64."""
    rng = np.random.default_rng(0)
    return {"logits": rng.normal(size=(T, 2, C)).astype(np.float32),
            "targets": np.array([[1, 2, 3], [2, 2, 0]], dtype=np.int64),
            "input_lengths": np.array([T, T], dtype=np.int64),
            "target_lengths": np.array([3, 2], dtype=np.int64)}


def _set(field: str, index, value):
    def change(b):
        b[field] = b[field].copy()
        b[field][index] = value
        return b
    return change


def _shape(T_: int | None = None, N: int | None = None):
    def change(b):
        n = b["logits"].shape[1] if N is None else N
        t = b["logits"].shape[0] if T_ is None else T_
        b["logits"] = b["logits"][:t, :n].copy()
        b["targets"] = b["targets"][:n].copy()
        b["input_lengths"] = np.minimum(b["input_lengths"][:n], t)
        b["target_lengths"] = b["target_lengths"][:n].copy()
        return b
    return change


def _cast(dtype):
    def change(b):
        b["logits"] = b["logits"].astype(dtype)
        return b
    return change


def _both(*changes):
    def change(b):
        for c in changes:
            b = c(b)
        return b
    return change


class Reaction(StrEnum):
    """What a framework call did with one malformed input (a robustness row's ``status``)."""

    RAISES = "raises"
    RETURNS = "returns"  # an answer; the row's ``sane`` says whether it could be right
    CRASHES = "crashes"  # the worker died
    HANGS = "hangs"  # no answer within the timeout
    NOT_EXPRESSIBLE = "not expressible"  # the framework's API cannot even take it
    NOT_TESTED = "not tested"  # the backend has no raw_ctc hook


def verdict(row: dict) -> tuple[str, bool | None]:
    """A row's reaction in a word (``returns`` split into ``returns sane`` / ``returns
    garbage``) and whether it is safe: an error or a sane answer (True), a crash, a hang or
    garbage (False), neither (None)."""
    status = Reaction(row["status"])
    if status is Reaction.RETURNS:
        return ("returns sane", True) if row.get("sane") else ("returns garbage", False)
    safe = {Reaction.RAISES: True, Reaction.CRASHES: False, Reaction.HANGS: False}
    return status.value, safe.get(status)

@dataclass(frozen=True)
class Malformed:
    """One input: ``change`` makes it from the valid batch; ``answer`` is None for an input
    that has no answer, else what each sample's loss must be: "nan" (the NaN logit reaches
    it), "nonfinite" (NaN or inf: log_softmax of +inf is NaN, +inf in a frame rules the
    others out), "inf" (infeasible), "ok" (the valid sample's own loss), "exact" (that, to
    float64's 1e-9), "ref" (the float64 reference's loss of the changed batch), or "empty" (no
    samples, no losses). ``blank``: the blank index the call is given."""

    name: str
    what: str
    change: Callable[[dict], dict]
    answer: tuple[str, ...] | None = None
    source: str = ""
    blank: int = 0


PROBES: tuple[Malformed, ...] = (
    Malformed("negative input length", "input_lengths[0] = -1", _set("input_lengths", 0, -1),
              source="pytorch#51732 (segfault on a large negative input length)"),
    Malformed("huge negative input length", "input_lengths[0] = -2**31",
              _set("input_lengths", 0, -2**31), source="pytorch#51732"),
    Malformed("input length > T", f"input_lengths[0] = {T + 3}, frames T = {T}",
              _set("input_lengths", 0, T + 3)),
    Malformed("negative target length", "target_lengths[0] = -1", _set("target_lengths", 0, -1)),
    Malformed("target length > width", f"target_lengths[0] = {S + 2}, targets padded to {S}",
              _set("target_lengths", 0, S + 2)),
    Malformed("label >= C", f"targets[0, 1] = {C} with C = {C}", _set("targets", (0, 1), C)),
    Malformed("label = blank", "targets[0, 1] = 0, the blank", _set("targets", (0, 1), 0),
              source="tensorflow#13457 (a label equal to blank: a silently wrong answer)"),
    Malformed("label near 2^31", "targets[0, 1] = 2147483647",
              _set("targets", (0, 1), 2**31 - 1),
              source="pytorch#191568 (out-of-bounds read on label 2147483647)"),
    Malformed("negative label", "targets[0, 1] = -1", _set("targets", (0, 1), -1)),
    Malformed("NaN in a valid frame", "logits[1, 0, 2] = NaN", _set("logits", (1, 0, 2), np.nan),
              answer=("nan", "ok")),
    Malformed("+inf in a valid frame", "logits[1, 0, 2] = +inf",
              _set("logits", (1, 0, 2), np.inf), answer=("nonfinite", "ok")),
    Malformed("empty batch", "N = 0: logits (T, 0, C), targets (0, S)", _shape(N=0),
              answer=("empty",)),
    Malformed("no frames", "T = 0: logits (0, 2, C), input lengths 0", _shape(T_=0),
              answer=("inf", "inf")),
    Malformed("target longer than input", "input_lengths[0] = 2 for 3 labels",
              _set("input_lengths", 0, 2), answer=("inf", "ok"),
              source="pytorch PR#130071 (illegal memory access when the target is longer)"),
    Malformed("repeats need more frames", "input_lengths[1] = 2 for target [2, 2]",
              _set("input_lengths", 1, 2), answer=("ok", "inf")),
    # valid inputs that frameworks get wrong
    Malformed("-inf in a valid frame", "logits[1, 0, 2] = -inf (that class never)",
              _set("logits", (1, 0, 2), -np.inf), answer=("ref", "ok"),
              source="a -inf log-probability: NaN gradients in torch (measured here)"),
    Malformed("empty target", "target_lengths[0] = 0", _set("target_lengths", 0, 0),
              answer=("ref", "ok")),
    Malformed("empty input and target", "input_lengths[0] = 0, target_lengths[0] = 0 (loss 0)",
              _both(_set("input_lengths", 0, 0), _set("target_lengths", 0, 0)),
              answer=("ref", "ok")),
    Malformed("blank last", f"blank = {C - 1}, labels 1..3", lambda b: b, answer=("ref", "ref"),
              blank=C - 1, source="baidu-research/warp-ctc#64 (the blank index convention)"),
    Malformed("float64 logits", "the valid batch in float64: the answer to 1e-9",
              _cast(np.float64), answer=("exact", "exact")),
    Malformed("float16 logits", "the valid batch in float16 (mixed precision)",
              _cast(np.float16), answer=("ref", "ref")),
)


def reference_losses(b: dict, blank: int = 0) -> np.ndarray:
    """A batch's losses ``(N,)`` from the float64 reference (the oracle of "ok" and "ref")."""
    problem = CTCProblem(np.asarray(b["logits"], np.float64), b["targets"], b["input_lengths"],
                         b["target_lengths"], blank=blank)
    return np.asarray(get_backend(REFERENCE).run(problem).loss, np.float64)


def valid_losses() -> np.ndarray:
    """The valid batch's two losses."""
    return reference_losses(valid_batch())


EXACT = 1e-9  # "exact": float64 agreement, relative


def sane(loss, answer: tuple[str, ...], valid: np.ndarray, tol: float = 1e-3,
         reference: np.ndarray | None = None) -> tuple[bool, str]:
    """Whether ``loss`` (what came back, any shape) is the answer; and why not. ``valid``: the
    valid batch's losses; ``reference``: the changed batch's (for "ref")."""
    loss = np.asarray(loss, np.float64).reshape(-1)
    if answer == ("empty",):
        return loss.size == 0, f"{loss.size} losses for an empty batch"
    if loss.size != len(answer):
        return False, f"{loss.size} losses for {len(answer)} samples"
    for n, want in enumerate(answer):
        x = loss[n]
        if want == "nan" and not np.isnan(x):
            return False, f"sample {n}: {x:.6g} from a NaN logit (want NaN)"
        if want == "nonfinite" and np.isfinite(x):
            return False, f"sample {n}: a finite loss {x:.6g} from an infinite logit"
        if want == "inf" and x != np.inf:
            return False, f"sample {n}: {x:.6g} for an infeasible target (want +inf)"
        if want in ("ok", "exact", "ref"):
            right = reference[n] if want == "ref" else valid[n]
            bound = EXACT if want == "exact" else tol
            if not abs(x - right) <= bound * max(1.0, abs(right)):  # NaN is never within
                return False, f"sample {n}: {x:.10g}, its loss is {right:.10g}"
    return True, ""


def _gradient(grad, b: dict) -> str | None:
    """What the gradient is on the first sample's valid frames: nan, zero or nonzero."""
    if grad is None:
        return None
    grad = np.asarray(grad, np.float64)
    if grad.ndim != 3 or grad.shape[1] < 1:
        return None
    g = grad[: max(int(b["input_lengths"][0]), 0), 0]  # (T_0, C)
    return "nan" if np.isnan(g).any() else "zero" if not g.any() else "nonzero"


def _summary(loss) -> str:
    loss = np.asarray(loss, np.float64).reshape(-1)
    return "[" + ", ".join(f"{x:.6g}" for x in loss[:4]) + (", ..." if loss.size > 4 else "") + "]"


def try_malformed(backend, probe: Malformed, *, timeout_s: float, valid=None) -> dict:
    """One probe on ``backend`` (a worker-backed ``LoadedBackend``): its row."""
    row = {"stage": "robustness", "item": probe.name, "what": probe.what, "source": probe.source,
           "sane": None, "grad": None}
    if not backend.traits.has_raw_ctc:
        return {**row, "status": Reaction.NOT_TESTED, "detail": "the backend has no raw_ctc hook"}
    b = probe.change(valid_batch())
    try:
        out = backend.raw_ctc(b["logits"], b["targets"], b["input_lengths"], b["target_lengths"],
                              blank=probe.blank, timeout_s=timeout_s)
    except UnsupportedProblem as exc:
        return {**row, "status": Reaction.NOT_EXPRESSIBLE, "detail": str(exc)[:500]}
    except BackendTimeout:
        return {**row, "status": Reaction.HANGS, "detail": f"no answer within {timeout_s:g} s"}
    except BackendCrashed as exc:
        return {**row, "status": Reaction.CRASHES, "detail": f"{exc.signal or exc.exitcode}: {exc}"[:500]}
    if out.outcome == "raised":
        return {**row, "status": Reaction.RAISES, "detail": f"{out.error_type}: {out.message}"[:500]}
    got, row["grad"] = _summary(out.loss), _gradient(out.grad_logits, b)
    if probe.answer is None:
        return {**row, "status": Reaction.RETURNS, "sane": False,
                "detail": f"returned {got} for an input that has no answer"}
    reference = reference_losses(b, probe.blank) if "ref" in probe.answer else None
    ok, why = sane(out.loss, probe.answer, valid_losses() if valid is None else valid,
                   reference=reference)
    return {**row, "status": Reaction.RETURNS, "sane": ok,
            "detail": f"returned {got}" + ("" if ok else f": {why}")}
