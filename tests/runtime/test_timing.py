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
    assert out.number == calls_per_measurement(0.01)


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
