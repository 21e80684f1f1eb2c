"""ctcbench.runtime.timing: the one timing loop, against calls of a known cost."""
from __future__ import annotations

import time

import pytest

from ctcbench.runtime.timing import MIN_MEASUREMENT_S, calls_per_measurement, time_calls


def test_first_call_is_timed_apart_from_the_steady_state():
    """A call that costs 200 ms the first time and 10 ms after: first_call_s sees the 200 ms,
    every measurement about 10 ms per call."""
    costs = iter([0.2])

    def call():
        time.sleep(next(costs, 0.01))
    out = time_calls(call, warmup=2, repeat=3)
    assert out.first_call_s >= 0.2
    assert len(out.times_s) == 3 and all(0.01 <= t < 0.1 for t in out.times_s)
    assert calls_per_measurement(0.02) <= out.number <= calls_per_measurement(0.01)  # a 10 ms
    # sleep takes a little longer on a loaded machine


def test_calibration_loops_fast_calls_to_about_the_minimum_measurement():
    """A 1 ms call is looped about 50 times per measurement; a slow one runs once; a given
    number is used as it is; nonsense counts are refused naming the function."""
    assert 40 <= calls_per_measurement(0.001) <= 60
    assert calls_per_measurement(MIN_MEASUREMENT_S * 3) == 1
    calls = []
    out = time_calls(lambda: calls.append(1), warmup=0, repeat=2, number=7)
    assert out.first_call_s is None and out.number == 7 and len(calls) == 14
    with pytest.raises(ValueError, match=r"time_calls: expected warmup >= 0"):
        time_calls(lambda: None, warmup=-1)


def test_the_work_between_calls_runs_before_each_and_stays_out_of_the_clock():
    """A 10 ms call with 30 ms of other work before each: every measurement about 10 ms a
    call, the other work run once before every call (warm-up and calibration included)."""
    order = []

    def between():
        order.append("between")
        time.sleep(0.03)

    def call():
        order.append("call")
        time.sleep(0.01)
    out = time_calls(call, warmup=1, repeat=2, number=2, between=between)
    assert all(0.01 <= t < 0.025 for t in out.times_s)
    assert order == ["call"] + ["between", "call"] * 4  # the warm-up call runs as it comes


def test_a_model_step_allocates_writes_and_frees_three_logits_worth():
    import resource

    from ctcbench.runtime.timing import between_calls
    assert between_calls("nothing", 10**6) is None
    step = between_calls("model-step", 64 * 2**20)  # above the 32 MiB floor
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    step()
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    assert faults >= 3 * 64 * 2**20 // (2 * 2**20)  # every page touched, huge pages at most
    with pytest.raises(ValueError, match="between_calls: expected one of nothing, model-step"):
        between_calls("sleep", 1)
