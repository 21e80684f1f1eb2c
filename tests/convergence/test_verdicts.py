"""Verdicts over learning rates and seeds: the best-rate rule with censored runs and ties,
the bootstrap interval of the median and of differences, against hand-computed values."""
import json
import math

import numpy as np
import pandas as pd
import pytest

from ctcbench.convergence.verdicts import (best_lr, bootstrap_difference, bootstrap_median,
                                           to_records, verdicts)

INF = math.inf


def runs(optimizer, lr, steps, final_cers, model="crnn"):
    """Summary rows of one (optimizer, lr) over seeds 0..n-1; None = never reached CER 10%."""
    return [dict(model=model, optimizer=optimizer, lr=lr, seed=s, steps_to_cer10=v, final_cer=c)
            for s, (v, c) in enumerate(zip(steps, final_cers))]


def test_censored_runs_count_as_inf_not_dropped():
    """A rate with one fast seed and two that never converge (median inf) loses to a rate
    whose seeds all but one converge (median 350): censored seeds are not dropped."""
    g = pd.DataFrame(runs("adam", 1e-3, [100, None, None], [0.05, 0.9, 0.9])
                     + runs("adam", 3e-3, [300, 350, None], [0.04, 0.05, 0.5]))
    assert best_lr(g) == 3e-3


def test_ties_broken_by_final_cer_then_smaller_rate():
    """Two rates that never converge (both medians inf) are told apart by median final CER;
    a full tie goes to the smaller rate."""
    g = pd.DataFrame(runs("sgd", 1e-3, [None, None], [0.8, 0.6]) + runs("sgd", 3e-3, [None, None], [0.5, 0.3]))
    assert best_lr(g) == 3e-3
    g = pd.DataFrame(runs("sgd", 3e-3, [200, 200], [0.1, 0.1]) + runs("sgd", 1e-3, [200, 200], [0.1, 0.1]))
    assert best_lr(g) == 1e-3


def test_bootstrap_of_three_seeds_hand_computed():
    """Values 1, 2, 3: a resampled median is 1 (or 3) with probability 7/27 (two or three
    draws of it), far above 2.5%, so the 95% interval is [1, 3] around the median 2."""
    assert bootstrap_median([1, 2, 3]) == (2.0, 1.0, 3.0)


def test_censored_values_stay_inf_inside_resamples():
    """Values 10, inf, inf: the median is inf; a resample's median is 10 with probability
    7/27, so the interval is [10, inf]; all censored gives [inf, inf]."""
    assert bootstrap_median([10, None, None]) == (INF, 10.0, INF)
    assert bootstrap_median([None, None, None]) == (INF, INF, INF)


@pytest.mark.parametrize("values", [[7], [5, 5, 5, 5]])
def test_constant_values_give_a_point_interval(values):
    """One seed, or seeds that all agree: every resample has the same median, so the
    interval is that single value."""
    assert bootstrap_median(values) == (values[0], values[0], values[0])


def test_interval_contains_the_median_and_is_reproducible():
    """For odd seed counts the sample median is itself a resample's median with probability
    far over 2.5%, so the interval contains it; the same seed gives the same interval."""
    rng = np.random.default_rng(1)
    for _ in range(20):
        values = list(rng.integers(50, 500, size=5))
        med, low, high = bootstrap_median(values)
        assert low <= med <= high and med == float(np.median(values))
        assert bootstrap_median(values) == (med, low, high)


def test_differences_hand_computed():
    """Constant arms give a point interval at the difference; a never-converging arm gives
    -inf for the other; two never-converging arms have no measurable difference."""
    assert bootstrap_difference([100, 100, 100], [200, 200, 200]) == (-100.0, -100.0, -100.0)
    assert bootstrap_difference([100, 100], [None, None]) == (-INF, -INF, -INF)
    point, low, high = bootstrap_difference([None, None], [None, None])
    assert math.isnan(point) and (low, high) == (-INF, INF)


def test_verdicts_table_and_json_records():
    """Each optimizer at its best rate with n_seeds and n_censored; the pairwise difference
    names the faster one; JSON records spell infinity as null, never "inf"."""
    summary = pd.DataFrame(
        runs("adam", 1e-3, [None, None, None], [0.9, 0.9, 0.9])
        + runs("adam", 3e-3, [400, 450, None], [0.05, 0.06, 0.4])
        + runs("rmsprop", 1e-3, [200, 250, 300], [0.02, 0.03, 0.04]))
    table, diffs = verdicts(summary)
    t = table.set_index("optimizer")
    assert t.loc["adam", "best_lr"] == 3e-3 and t.loc["adam", "median"] == 450
    assert (t.loc["adam", "n_seeds"], t.loc["adam", "n_censored"]) == (3, 1)
    assert t.loc["adam", "ci_high"] == INF  # resamples with two censored seeds have median inf
    assert (t.loc["rmsprop", "ci_low"], t.loc["rmsprop", "ci_high"]) == (200, 300)
    d = diffs.iloc[0]
    assert (d["optimizer"], d["versus"], d["difference"]) == ("adam", "rmsprop", 200.0)
    # adam's resampled medians are >= 400 and rmsprop's <= 300: every difference is >= 100
    assert d["ci_low"] >= 100 and d["faster"] == "rmsprop"
    records = to_records(table)
    text = json.dumps(records)
    assert '"inf"' not in text and "Infinity" not in text
    adam = next(r for r in records if r["optimizer"] == "adam")
    assert adam["ci_high"] is None and set(adam) >= {
        "optimizer", "model", "best_lr", "metric", "median", "ci_low", "ci_high", "n_seeds",
        "n_censored"}
