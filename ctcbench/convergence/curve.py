"""``curve.jsonl`` of a training run: one row per eval, and the numbers derived from a curve.

A run evaluates at step 0, every ``eval_every`` steps and at its last step. Each row holds
the step, losses, CER, sequence accuracy, blank fraction, mean characters emitted per line,
gradient/update norms, lr, CPU and wall time, and with ``diagnose_every`` the doctor's
finding codes (``findings``, or null).

Derived per run (``summarize``):
  plateau_end_step  the first eval step after step 0 at which greedy decoding of the held-out
                    set emits on average at least one character per line (``emitted >= 1``).
                    Before it the model predicts (almost) only blanks: the blank plateau. The
                    untrained model at step 0 emits random characters and is not counted.
  steps_to_cer10 / steps_to_cer02   first eval step with held-out CER < 10% / < 2%; ``None``
                    (censored) if the run ended first.
"""
from __future__ import annotations

# curve.jsonl spells inf/nan as strings (JSON has no such numbers); these fields read back as floats
CURVE_FLOATS = ("train_loss", "test_loss", "cer", "seq_acc", "blank_frac", "emitted", "grad_norm",
                "update_norm", "lr", "cpu_s", "wall_s")


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
