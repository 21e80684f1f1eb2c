"""ctcbench.compare.slow: a --function's cases run cheapest first, and those predicted past
the limit (all their calls), or no smaller than one that timed out, skipped. The calls'
seconds are a closed form in the cases' sizes, so what must be predicted is known."""
from __future__ import annotations

import numpy as np
import pytest

from ctcbench.caselib.library import load_cases
from ctcbench.compare.checks import prepare
from ctcbench.compare.slow import SlowCases, cheapest_first
from ctcbench.runtime.registry import get_backend

SHORT = ("toy_alpha_beta", "tf_basic", "single_alignment_distinct", "torch_no_batch_dim_none",
         "warpctc_grad_check_20x50", "fl_ctc_jacobian", "peaked_logits_spread300_long")
NAMES = (*SHORT, "uniform_batch_lengths", "target_length_255", "uniform_repeats_t2500",
         "torch_ctc_loss_gradcheck_150_fixed_zero_none")


@pytest.fixture(scope="module")
def preps():
    cases = {c.name: c for c in load_cases(None) if c.name in NAMES}
    return {name: prepare(cases[name], "float64") for name in NAMES}


@pytest.fixture(scope="module")
def backend():
    return get_backend("numpy")


def seconds(prep) -> float:
    """20 ms a call plus 20 us per frame pair of each sample (an O(T²) backward)."""
    return sum(0.02 + 2e-5 * float((np.asarray(p.input_lengths, float) ** 2).sum())
               for p in prep.problems)


def test_cases_run_cheapest_first(preps):
    """By frames² x (states + classes) over the samples: toy_alpha_beta (3 frames, 2
    labels, 3 classes: 72), tf_basic (2 x 5 frames, 5 labels, 6 classes: 850),
    target_length_255 (255 frames, 255 labels, 40 classes: 3.6e7), then 2500 frames of 25
    labels and 4 classes (3.4e8), though the 255 frames have more work per frame."""
    names = ("uniform_repeats_t2500", "target_length_255", "tf_basic", "toy_alpha_beta")
    jobs = [(preps[n].case, "float64") for n in names]
    ordered = cheapest_first(jobs, {(p.case.name, "float64"): p for p in preps.values()})
    assert [c.name for c, _ in ordered] == list(reversed(names))


def test_a_case_predicted_past_the_limit_is_skipped_and_said_once(preps, backend):
    """Seven short cases timed; the 3000-frame case, ~210 s a call, is skipped with an O(T²)
    prediction; the end line says the timeout and restart it spared, the option once."""
    said = []
    slow = SlowCases([backend.name], None, say=said.append)  # the limit: the 120 s timeout
    for name in SHORT:
        assert slow.skip(backend, preps[name]) is None
        slow.seen(backend, preps[name], {"status": "ok", "time_s": seconds(preps[name])})
    long = preps["uniform_batch_lengths"]
    row = slow.skip(backend, long)
    assert row["status"] == "skipped" and row["case"] == "uniform_batch_lengths"
    assert row["reason"].startswith("predicted slow: O(T²): ")
    predicted = float(row["reason"].split(": ")[2].split(" s ")[0])
    assert predicted == pytest.approx(seconds(long), rel=0.05)
    assert "--predict-limit 0 runs it" in row["reason"]
    slow.skip(backend, long)
    assert len(said) == 1 and "--predict-limit 0" in said[0]
    [line] = slow.lines()
    assert "2 rows skipped (uniform_batch_lengths)" in line
    assert "2 calls past the 120 s timeout, each a timeout and a restart of the worker" in line


def test_a_case_is_predicted_with_every_call_its_checks_make(preps, backend):
    """torch_ctc_loss_gradcheck_150_fixed_zero_none makes 14 calls (its one problem, 2 x 6
    finite-difference coordinates, a weighted run for its mean reduction), each ~29 s: no
    call near the 120 s timeout, but the case ~400 s, past the default limit."""
    slow = SlowCases([backend.name], None, say=lambda _: None)
    for name in SHORT:
        slow.seen(backend, preps[name], {"status": "ok", "time_s": seconds(preps[name])})
    case = preps["torch_ctc_loss_gradcheck_150_fixed_zero_none"]
    row = slow.skip(backend, case)
    assert row["status"] == "skipped" and "for its 14 calls, past the 120 s" in row["reason"]
    total = float(row["reason"].split(", ")[1].split(" s for")[0])
    assert total == pytest.approx(14 * seconds(case), rel=0.05)
    assert "0 calls past" not in slow.lines()[0] and "timeout" not in slow.lines()[0]


def test_limit_zero_runs_every_case(preps, backend):
    slow = SlowCases([backend.name], 0.0)
    for name in SHORT:
        slow.seen(backend, preps[name], {"status": "ok", "time_s": seconds(preps[name])})
    slow.seen(backend, preps["tf_basic"], {"status": "timeout"})
    assert slow.skip(backend, preps["uniform_batch_lengths"]) is None
    assert slow.lines() == []


def test_a_case_no_smaller_than_one_that_timed_out_is_skipped(preps, backend):
    """tf_basic timed out: 3000 frames of 3 samples is no smaller in any measure, so it is
    skipped without a prediction; a single sample of 3 frames is smaller, so it runs."""
    slow = SlowCases([backend.name], None, say=lambda _: None)
    slow.seen(backend, preps["tf_basic"], {"status": "timeout"})
    row = slow.skip(backend, preps["uniform_batch_lengths"])
    assert row["status"] == "skipped" and "tf_basic (float64), which timed out" in row["reason"]
    assert slow.skip(backend, preps["toy_alpha_beta"]) is None


def test_only_the_named_functions_are_predicted(preps, backend):
    """A backend that is not among the functions runs every case, whatever was seen."""
    slow = SlowCases(["mine:ctc"], 0.001)
    slow.seen(backend, preps["tf_basic"], {"status": "timeout"})
    assert slow.skip(backend, preps["uniform_batch_lengths"]) is None
