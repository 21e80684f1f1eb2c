"""The datasheet's limits on plugins with a planted cliff: each reported to the step, with
what happens past it (wrong, crashes, hangs, refuses), and the probes as rows."""
from __future__ import annotations

import json

import pytest

import ctcbench
from ctcbench.caselib.builders import problem_of
from ctcbench.datasheet.axes import AXES
from ctcbench.datasheet.run import datasheet

pytestmark = pytest.mark.usefixtures("one_thread")

CLIFFS = {  # name -> (class in cliff_backends, axis, last right size, what happens past it)
    "wrong-past-L300": ("WrongPastL300", "L", 300, "wrong"),
    "crash-past-T700": ("CrashPastT700", "T", 700, "crashes"),
    "hang-past-N40": ("HangPastN40", "N", 40, "hangs"),
    "refuse-past-C1000": ("RefusePastC1000", "C", 1000, "refuses"),
    "wrong-from-label255": ("WrongFromLabel255", "label", 254, "wrong"),
}


def test_each_axis_builds_the_shape_it_declares():
    """A problem of every axis at a few sizes has the (T, N, C, L) ``shape`` says, its
    targets fit, and its largest label is the label axis' value."""
    for axis in AXES.values():
        for p in (axis.start, 2 * axis.start + 1, 37):
            problem = problem_of(axis.build(p), "float32")
            assert problem.shape == axis.shape(p), (axis.name, p)
            assert problem.feasible().all()
    assert problem_of(AXES["label"].build(300), "float32").targets.max() == 300


@pytest.mark.long
@pytest.mark.parametrize("name", list(CLIFFS))
def test_a_planted_cliff_is_reported_exactly(name, register_backends, tmp_path):
    attr, axis, last, past = CLIFFS[name]
    register_backends(name, f"cliff_backends:{attr}")
    result = datasheet([name], stages=("limits",), axes=(axis,), budget=40, timeout=3,
                       out=tmp_path / "run", progress=False)
    limit = result.summary["sheets"][name]["limits"]["float32"][axis]
    assert (limit["correct"], limit["failing"], limit["past_status"]) == (last, last + 1, past)
    assert limit["exact"] and limit["status"] == "found" and limit["sharp"]
    if past == "crashes":
        assert "SIGSEGV" in limit["detail"]
    if past == "refuses":
        assert "at most 1000 classes" in limit["detail"]
    rows = [json.loads(line) for line in (tmp_path / "run" / "rows.jsonl").read_text().splitlines()]
    probes = {r["value"]: r["status"] for r in rows if r["stage"] == "probe"}
    assert probes[last] == "ok" and probes[last + 1] == past
    assert all((s == "ok") == (v <= last) for v, s in probes.items())  # every probe right


def test_a_correct_backend_is_correct_up_to_at_least(tmp_path):
    """numba on the N axis within a small memory limit: no failure, "at least" the largest
    size that fits, and why the search stopped."""
    result = datasheet(["numba"], stages=("limits",), axes=("N",), budget=30,
                       max_memory_mb=64, out=tmp_path / "run", progress=False)
    limit = result.summary["sheets"]["numba"]["limits"]["float32"]["N"]
    assert limit["failing"] is None and limit["correct"] >= 256
    assert limit["text"] == f">= {limit['correct']}"
    assert limit["stopped"] and ("memory" in limit["stopped"] or "budget" in limit["stopped"])


def test_an_error_growing_into_the_bound_is_no_cliff(register_backends, tmp_path):
    """A loss error of 1e-8 * T**2 * |first logit| crosses the float32 bound (about 2.6e-5 T
    on these problems) at a T that depends on the draw: the last right and first wrong sizes at two other seeds disagree, and the
    limit says "~T (the error reaches the float32 bound; no cliff)"."""
    register_backends("drift-T", "cliff_backends:DriftsWithTAndFirstLogit")
    result = datasheet(["drift-T"], stages=("limits",), axes=("T",), budget=40, timeout=10,
                       out=tmp_path / "run", progress=False)
    limit = result.summary["sheets"]["drift-T"]["limits"]["float32"]["T"]
    assert limit["past_status"] == "wrong" and limit["sharp"] is False
    assert limit["text"] == f"~{limit['correct']} (the error reaches the float32 bound; no cliff)"
