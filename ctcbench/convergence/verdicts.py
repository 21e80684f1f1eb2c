"""Which optimizer wins, judged at each optimizer's own best learning rate, with the spread
over seeds.

The rule (one per (model, optimizer)):

  * metric: ``steps_to_cer10``, the first eval step with held-out CER under 10% (see
    ctcbench.convergence.curve). A run that never gets there is *censored*: its value is
    ``+inf``, never dropped, so a rate that fails on some seeds is penalised for it.
  * best learning rate: the lowest median of the metric over seeds; ties (for example two
    rates whose medians are both ``inf``) are broken by the lower median final CER (a
    diverged run's NaN counts as ``inf``), then by the smaller rate.
  * at that rate: the median over seeds and a percentile bootstrap 95% interval of the
    median: ``resamples`` draws of the seeds with replacement (a seeded generator, so the
    interval is reproducible), the median of each, and the order statistics at 2.5% and
    97.5% without interpolation (``sorted[floor(0.025 B)]``, ``sorted[ceil(0.975 B) - 1]``),
    so a censored ``inf`` stays ``inf`` inside the resamples and an interval may be
    ``[x, inf]``.
  * differences (per model, every pair of optimizers, each at its best rate): the median of
    the first minus the median of the second, negative when the first is faster; the
    interval resamples the seeds of both independently. ``inf - inf`` (both medians censored
    in a resample) is undefined and counts as ``-inf`` for the lower bound and ``+inf`` for
    the upper one, so it can only widen the interval. ``faster`` names the optimizer whose
    interval excludes zero in its favour, else ``None``.

JSON output (``to_records``) writes infinities as ``null``.
"""
from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import pandas as pd

METRIC = "steps_to_cer10"
RESAMPLES = 2000
LEVEL = 0.95


def censored(values) -> np.ndarray:
    """Metric values as floats, a missing value (never reached) as ``+inf``."""
    return np.array([math.inf if v is None or pd.isna(v) else float(v) for v in values], dtype=float)


def median(values: np.ndarray) -> float:
    """The median, ``inf`` when at least half the middle is censored (NumPy's mean of the
    two middle values keeps ``inf``)."""
    return float(np.median(values))


def order_interval(stats: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """Percentile interval of bootstrap statistics by order statistics (no interpolation,
    so ``inf`` stays ``inf``)."""
    s = np.sort(stats)
    B = len(s)
    alpha = (1 - level) / 2
    return float(s[math.floor(alpha * B)]), float(s[math.ceil((1 - alpha) * B) - 1])


def resampled_medians(values: np.ndarray, rng: np.random.Generator, resamples: int) -> np.ndarray:
    """The median of each of ``resamples`` draws of ``values`` with replacement: ``(B,)``."""
    idx = rng.integers(0, len(values), size=(resamples, len(values)))  # (B, n)
    return np.median(values[idx], axis=1)  # (B,)


def bootstrap_median(values, *, resamples: int = RESAMPLES, seed: int = 0,
                     level: float = LEVEL) -> tuple[float, float, float]:
    """``(median, ci_low, ci_high)`` of ``values`` (``inf`` = censored)."""
    values = censored(values)
    if len(values) == 0:
        raise ValueError("values: expected at least one seed, got none")
    stats = resampled_medians(values, np.random.default_rng(seed), resamples)
    return (median(values), *order_interval(stats, level))


def bootstrap_difference(a, b, *, resamples: int = RESAMPLES, seed: int = 0,
                         level: float = LEVEL) -> tuple[float, float, float]:
    """``(median(a) - median(b), ci_low, ci_high)``; ``inf - inf`` is ``nan`` as the point
    value and widens the interval (see the module docstring)."""
    a, b = censored(a), censored(b)
    rng = np.random.default_rng(seed)
    with np.errstate(invalid="ignore"):
        diffs = resampled_medians(a, rng, resamples) - resampled_medians(b, rng, resamples)  # (B,)
        point = median(a) - median(b)
    undefined = np.isnan(diffs)
    low, _ = order_interval(np.where(undefined, -math.inf, diffs), level)
    _, high = order_interval(np.where(undefined, math.inf, diffs), level)
    return point, low, high


def best_lr(runs: pd.DataFrame, metric: str = METRIC) -> float:
    """The best learning rate of one (model, optimizer) under the rule above."""
    keyed = []
    for lr, g in runs.groupby("lr"):
        final = censored(g["final_cer"])
        keyed.append((median(censored(g[metric])), median(final), float(lr)))
    return min(keyed)[2]


def verdicts(summary: pd.DataFrame, *, metric: str = METRIC, resamples: int = RESAMPLES,
             seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(verdicts, differences)`` from the summary rows (columns ``model``, ``optimizer``,
    ``lr``, ``seed``, ``final_cer`` and ``metric``: a step column, missing = censored)."""
    rows, at_best = [], {}
    for (model, opt), g in summary.groupby(["model", "optimizer"], sort=False):
        lr = best_lr(g, metric)
        values = censored(g.loc[g["lr"] == lr, metric])
        med, low, high = bootstrap_median(values, resamples=resamples, seed=seed)
        at_best[model, opt] = values
        rows.append({"model": model, "optimizer": opt, "best_lr": lr, "metric": metric,
                     "median": med, "ci_low": low, "ci_high": high, "n_seeds": len(values),
                     "n_censored": int(np.isinf(values).sum())})
    diffs = []
    for model in dict.fromkeys(r["model"] for r in rows):
        opts = [r["optimizer"] for r in rows if r["model"] == model]
        for first, second in combinations(opts, 2):
            point, low, high = bootstrap_difference(at_best[model, first], at_best[model, second],
                                                    resamples=resamples, seed=seed)
            faster = first if high < 0 else second if low > 0 else None
            diffs.append({"model": model, "optimizer": first, "versus": second, "metric": metric,
                          "difference": point, "ci_low": low, "ci_high": high, "faster": faster})
    return pd.DataFrame(rows), pd.DataFrame(diffs)


def to_records(df: pd.DataFrame) -> list[dict]:
    """Rows for JSON: infinities (and an undefined ``nan``) as ``None``."""
    def clean(v):
        if isinstance(v, (float, np.floating)) and not math.isfinite(v):
            return None
        return v.item() if isinstance(v, np.generic) else v
    return [{k: clean(v) for k, v in r.items()} for r in df.to_dict("records")]


def write_verdicts(run_dir, summary: pd.DataFrame) -> dict:
    """``verdicts.json`` in the run folder: ``{"verdicts": [...], "differences": [...]}``."""
    import json
    from pathlib import Path
    table, diffs = verdicts(summary)
    out = {"verdicts": to_records(table), "differences": to_records(diffs)}
    (Path(run_dir) / "verdicts.json").write_text(json.dumps(out, indent=2) + "\n")
    return out
