"""The datasheet's repeat calls: ``REPEATS`` calls on one problem give the same bits, or differ
by how much (``judge.call_differences``, the measure compare's run-to-run check uses)."""
from __future__ import annotations

from enum import StrEnum

from ctcbench.caselib.judge import call_differences, worst
from ctcbench.runtime.sizes import TARGET_SIZES, make_problem

REPEATS = 5  # calls compared
DETERMINISM_SIZE = TARGET_SIZES[1]  # T=200 N=16 C=50 L=40


class Repeats(StrEnum):
    """What the repeat calls found (a determinism row's ``status``)."""

    IDENTICAL = "identical"
    DIFFER = "differs"
    FAILED = "failed"  # a call raised; the row's detail says what


def determinism(backend, dtype: str) -> dict:
    """The determinism row of ``backend`` in ``dtype``; a call that raises is its answer."""
    row = {"stage": "determinism", "item": DETERMINISM_SIZE.label, "calls": REPEATS}
    problem = make_problem(DETERMINISM_SIZE, dtype=dtype, seed=1)
    try:
        first = backend.run(problem)
        loss_diff = grad_diff = 0.0
        identical = True
        for _ in range(REPEATS - 1):
            diff = call_differences(backend.run(problem), first)  # None: the same bits
            identical &= diff["loss"] is None and diff["grad"] is None
            loss_diff = worst(loss_diff, diff["loss"] or 0.0)
            grad_diff = worst(grad_diff, diff["grad"] or 0.0)
    except Exception as exc:  # what it raised is the row's answer
        return {**row, "status": Repeats.FAILED, "detail": f"{type(exc).__name__}: {exc}"[:500]}
    return {**row, "status": Repeats.IDENTICAL if identical else Repeats.DIFFER,
            "loss_diff": loss_diff, "grad_diff": grad_diff,
            "declared": backend.traits.nondeterministic}
