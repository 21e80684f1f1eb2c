"""The settings of ``ctcbench compare``, declared once (:mod:`ctcbench.settings`): its options,
the library's checks and docs/cli.md are made from ``CompareSettings``. What it checks
(backends, cases, dtypes, files) is chosen by its own options."""
from __future__ import annotations

from dataclasses import dataclass

from ctcbench.settings import NON_NEGATIVE, setting, settings


@dataclass(frozen=True)
class CompareSettings:
    plot: bool = setting(True, "Save margins.png (error / tolerance per case and backend) in "
                               "the run folder.")
    max_change: float = setting(0.0, "The most a number may move from --baseline: |new - old| "
                                     "/ max(|old|, 1).", check=NON_NEGATIVE)


def compare_settings():
    """Every setting of compare (for ``SettingsCommand``)."""
    return settings(CompareSettings)
