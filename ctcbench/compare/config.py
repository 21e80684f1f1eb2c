"""The settings of ``ctcbench compare``, declared once (:mod:`ctcbench.settings`): its options,
the library's checks and docs/cli.md are made from ``CompareSettings``. What it checks
(backends, cases, dtypes, files) is chosen by its own options."""
from __future__ import annotations

from dataclasses import dataclass

from ctcbench.settings import NON_NEGATIVE, setting, settings


def _frameworks():
    from ctcbench.compare.inherited import FRAMEWORKS
    return FRAMEWORKS


@dataclass(frozen=True)
class CompareSettings:
    plot: bool = setting(True, "Save margins.png (error / tolerance per case and backend) in "
                               "the run folder.")
    max_change: float = setting(0.0, "The most a number may move from --baseline: |new - old| "
                                     "/ max(|old|, 1).", check=NON_NEGATIVE)
    accept_known: tuple[str, ...] = setting(
        (), "A framework your --function wraps (repeatable): its failing rows that are that "
            "framework's known issues, with the same values as its own call, are known, not "
            "failing (ctcbench.compare.inherited).", choices=_frameworks, metavar="FRAMEWORK")
    predict_limit: float | None = setting(
        None, "Seconds a case of a --function may be predicted to take, all its calls (one "
              "per variant, and those of its finite-difference and repeat checks): each case is "
              "predicted from the calls before it, cheapest cases first, and one predicted past "
              "this is skipped, with the prediction and the growth it implies  [default: the "
              "function's per-call timeout, 120 s; 0 runs every case].", check=NON_NEGATIVE,
        metavar="SECONDS")


def compare_settings():
    """Every setting of compare (for ``SettingsCommand``)."""
    return settings(CompareSettings)
