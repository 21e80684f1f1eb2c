"""The datasheet's malformed inputs: the backend's own framework call (its ``raw_ctc`` hook,
in a worker process) handed what ``CTCProblem`` would refuse, and what it did.

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
    """One malformed input: ``change`` makes it from the valid batch; ``answer`` is None for
    an input that has no answer, else what each sample's loss must be: "nan" (the NaN logit
    reaches it), "nonfinite" (NaN or inf: log_softmax of +inf is NaN, +inf in a frame rules
    the others out), "inf" (infeasible), "ok" (the valid sample's own loss), or "empty" (no
    samples, no losses)."""

    name: str
    what: str
    change: Callable[[dict], dict]
    answer: tuple[str, ...] | None = None
    source: str = ""


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
)


def valid_losses() -> np.ndarray:
    """The valid batch's two losses, from the float64 reference (the oracle of "ok")."""
    b = valid_batch()
    problem = CTCProblem(b["logits"], b["targets"], b["input_lengths"], b["target_lengths"])
    return np.asarray(get_backend(REFERENCE).run(problem).loss, np.float64)


def sane(loss, answer: tuple[str, ...], valid: np.ndarray, tol: float = 1e-3) -> tuple[bool, str]:
    """Whether ``loss`` (what came back, any shape) is the answer; and why not."""
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
        if want == "ok" and not abs(x - valid[n]) <= tol * max(1.0, abs(valid[n])):
            return False, f"sample {n}: {x:.6g}, its own loss is {valid[n]:.6g}"
    return True, ""


def _summary(loss) -> str:
    loss = np.asarray(loss, np.float64).reshape(-1)
    return "[" + ", ".join(f"{x:.6g}" for x in loss[:4]) + (", ..." if loss.size > 4 else "") + "]"


def try_malformed(backend, probe: Malformed, *, timeout_s: float, valid=None) -> dict:
    """One probe on ``backend`` (a worker-backed ``LoadedBackend``): its row."""
    row = {"stage": "robustness", "item": probe.name, "what": probe.what, "source": probe.source,
           "sane": None}
    if not backend.traits.has_raw_ctc:
        return {**row, "status": Reaction.NOT_TESTED, "detail": "the backend has no raw_ctc hook"}
    b = probe.change(valid_batch())
    try:
        out = backend.raw_ctc(b["logits"], b["targets"], b["input_lengths"], b["target_lengths"],
                              blank=0, timeout_s=timeout_s)
    except UnsupportedProblem as exc:
        return {**row, "status": Reaction.NOT_EXPRESSIBLE, "detail": str(exc)[:500]}
    except BackendTimeout:
        return {**row, "status": Reaction.HANGS, "detail": f"no answer within {timeout_s:g} s"}
    except BackendCrashed as exc:
        return {**row, "status": Reaction.CRASHES, "detail": f"{exc.signal or exc.exitcode}: {exc}"[:500]}
    if out.outcome == "raised":
        return {**row, "status": Reaction.RAISES, "detail": f"{out.error_type}: {out.message}"[:500]}
    got = _summary(out.loss)
    if probe.answer is None:
        return {**row, "status": Reaction.RETURNS, "sane": False,
                "detail": f"returned {got} for an input that has no answer"}
    ok, why = sane(out.loss, probe.answer, valid_losses() if valid is None else valid)
    return {**row, "status": Reaction.RETURNS, "sane": ok,
            "detail": f"returned {got}" + ("" if ok else f": {why}")}
