"""``curve.jsonl`` of a training run: one row per eval, the rows a resumed run keeps, and the
numbers derived from a curve.

A run evaluates at step 0, every ``eval_every`` steps and at its last step (``eval_steps``).
Each row holds the step, losses, CER, sequence accuracy, blank fraction, mean characters
emitted per line, gradient/update norms, lr, CPU and wall time, and with ``diagnose_every``
the doctor's finding codes (``findings``, or null).

Derived per run (``summarize``):
  plateau_end_step  the first eval step after step 0 at which greedy decoding of the held-out
                    set emits on average at least one character per line (``emitted >= 1``).
                    Before it the model predicts (almost) only blanks: the blank plateau. The
                    untrained model at step 0 emits random characters and is not counted.
  steps_to_cer10 / steps_to_cer02   first eval step with held-out CER < 10% / < 2%; ``None``
                    (censored) if the run ended first.
"""
from __future__ import annotations

from pathlib import Path

from ctcbench.files import atomic_write, to_json
from ctcbench.runs.store import RowLog

# curve.jsonl spells inf/nan as strings (JSON has no such numbers); these fields read back as floats
CURVE_FLOATS = ("train_loss", "test_loss", "cer", "seq_acc", "blank_frac", "emitted", "grad_norm",
                "update_norm", "lr", "cpu_s", "wall_s")


def eval_steps(steps: int, eval_every: int) -> list[int]:
    """The steps a run of ``steps`` steps logs a row at, in order."""
    return sorted({*range(0, steps + 1, eval_every), steps})


def complete_rows(path: Path, schedule: list[int]) -> list[dict]:
    """The rows of the curve at ``path`` that a resumed run can keep: those of the steps of
    ``schedule``, in order, up to the first one missing (a torn or damaged line, a gap)."""
    rows = RowLog(path).rows(floats=CURVE_FLOATS)
    kept = []
    for row, step in zip(rows, schedule):
        if row.get("step") != step:
            break
        kept.append(row)
    return kept


def write_rows(path: Path, rows: list[dict]) -> None:
    """Replace the curve at ``path`` by ``rows``, atomically: a kill leaves the old or new one."""
    atomic_write(path, "".join(to_json(r) + "\n" for r in rows))


def _first(rows, pred):
    return next((r["step"] for r in rows if pred(r)), None)


def summarize(rows: list[dict]) -> dict:
    """Derived numbers of one curve (see the module docstring for definitions)."""
    last = rows[-1]
    return {
        "steps": last["step"],
        "plateau_end_step": _first(rows, lambda r: r["step"] > 0 and r["emitted"] >= 1.0),
        "steps_to_cer10": _first(rows, lambda r: r["cer"] < 0.10),
        "steps_to_cer02": _first(rows, lambda r: r["cer"] < 0.02),
        "final_cer": last["cer"], "final_seq_acc": last["seq_acc"],
        "final_test_loss": last["test_loss"], "final_blank_frac": last["blank_frac"],
        "cpu_s": last["cpu_s"], "wall_s": last["wall_s"],
    }
