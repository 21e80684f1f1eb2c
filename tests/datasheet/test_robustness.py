"""Malformed input to a backend's own framework call: each plugin's behaviour marked as what
it is (raises, crashes, hangs, returns sane or garbage, not tested)."""
from __future__ import annotations

import numpy as np
import pytest

from ctcbench.runtime.malformed import PROBES, sane, try_malformed, valid_batch
from ctcbench.datasheet.run import datasheet
from ctcbench.runtime.registry import get_backend

pytestmark = pytest.mark.usefixtures("one_thread")
NO_ANSWER = {p.name for p in PROBES if p.answer is None}


def verdicts(name, register_backends, attr, tmp_path, timeout=60.0):
    register_backends(name, f"cliff_backends:{attr}")
    result = datasheet([name], stages=("robustness",), timeout=timeout, out=tmp_path / name,
                       progress=False)
    rows = result.summary["sheets"][name]["robustness"]
    assert [r["item"] for r in rows] == [p.name for p in PROBES]
    return {r["item"]: r for r in rows}


def test_every_probe_changes_the_valid_batch():
    """Each probe differs from the valid batch: its values, a shape, a dtype or the blank."""
    base = valid_batch()
    for probe in PROBES:
        b = probe.change(valid_batch())
        assert probe.blank != 0 or any(
            b[k].shape != base[k].shape or b[k].dtype != base[k].dtype
            or not np.array_equal(b[k], base[k], equal_nan=True) for k in base), probe.name


def test_sane_by_hand():
    """An infeasible sample must be +inf, a NaN one not finite, a valid one its own loss."""
    valid = np.array([3.0, 4.0])
    assert sane([np.inf, 4.0], ("inf", "ok"), valid)[0]
    assert not sane([700.0, 4.0], ("inf", "ok"), valid)[0]
    assert sane([np.nan, 4.0], ("nan", "ok"), valid)[0]
    assert not sane([1.5, 4.0], ("nan", "ok"), valid)[0]
    assert not sane([np.inf, 4.0], ("nan", "ok"), valid)[0]  # +inf says infeasible: wrong
    assert sane([np.inf, 4.0], ("nonfinite", "ok"), valid)[0]
    assert not sane([2.0, 4.0], ("nonfinite", "ok"), valid)[0]
    assert not sane([np.inf, 4.5], ("inf", "ok"), valid)[0]
    assert sane(np.zeros(0), ("empty",), valid)[0] and not sane([0.0], ("empty",), valid)[0]


@pytest.mark.long
def test_a_raw_call_that_segfaults_is_marked_crashes(register_backends, tmp_path):
    """Segfaults on what a CTCProblem refuses, answers right otherwise: every input without an
    answer crashes (the worker restarted each time), the others are sane or crash."""
    got = verdicts("raw-segv", register_backends, "RawSegfaults", tmp_path)
    for name in NO_ANSWER:
        assert got[name]["verdict"] == "crashes" and "SIGSEGV" in got[name]["detail"], name
    assert got["target longer than input"]["verdict"] == "returns sane"
    assert got["repeats need more frames"]["verdict"] == "returns sane"


def test_a_raw_call_that_returns_garbage_is_marked_so(register_backends, tmp_path):
    """0.5 for every sample whatever the input: garbage for every input that has no answer
    and wherever a value is checked, except the empty batch (no samples, no losses: right)."""
    got = verdicts("raw-garbage", register_backends, "RawGarbage", tmp_path)
    assert got.pop("empty batch")["verdict"] == "returns sane"
    assert {r["verdict"] for r in got.values()} == {"returns garbage"}
    assert "0.5 from a NaN logit" in got["NaN in a valid frame"]["detail"]
    assert "a finite loss 0.5" in got["+inf in a valid frame"]["detail"]


@pytest.mark.long
def test_raises_and_hangs_and_no_hook(register_backends, tmp_path):
    """A raw call that raises is "raises" with its message; one that never answers "hangs"
    within the timeout; a backend with no hook "not tested"."""
    got = verdicts("raw-raises", register_backends, "RawRaises", tmp_path)
    assert {r["verdict"] for r in got.values()} == {"raises"}
    assert "refused by the framework" in got["label >= C"]["detail"]
    register_backends("raw-hangs", "cliff_backends:RawHangs")
    hangs = get_backend("raw-hangs", isolated=True)
    try:
        row = try_malformed(hangs, PROBES[0], timeout_s=1.5, valid=np.array([1.0, 1.0]))
    finally:
        hangs.close()
    assert row["status"] == "hangs" and "1.5 s" in row["detail"]
    got = verdicts("raw-none", register_backends, "NoRawHook", tmp_path)
    assert {r["verdict"] for r in got.values()} == {"not tested"}


def test_the_answers_of_the_valid_probes_are_the_closed_forms():
    """An empty target's loss is -sum_t log p_t(blank); an empty input with an empty target
    has loss 0; blank last with no blank among the labels, float64 and float16 logits keep
    the valid batch's loss (float16 to its rounding): the oracle "ref" computes these."""
    from ctcbench.core.ctcmath import log_softmax
    from ctcbench.runtime.malformed import reference_losses, valid_losses
    probes = {p.name: p for p in PROBES}
    b = probes["empty target"].change(valid_batch())
    lp = log_softmax(b["logits"].astype(np.float64))  # (T, N, C)
    assert reference_losses(b)[0] == pytest.approx(-lp[:, 0, 0].sum(), rel=1e-12)
    assert reference_losses(probes["empty input and target"].change(valid_batch()))[0] == 0
    valid = valid_losses()
    assert reference_losses(probes["float64 logits"].change(valid_batch())) == \
        pytest.approx(valid, rel=1e-12)
    assert reference_losses(probes["float16 logits"].change(valid_batch())) == \
        pytest.approx(valid, rel=1e-3)
