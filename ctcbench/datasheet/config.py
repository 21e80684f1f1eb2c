"""The settings of ``ctcbench datasheet``, declared once: the command's options, the library's
checks, the reproducing command in datasheet.md and docs/cli.md are all made from
``DatasheetSettings`` (:mod:`ctcbench.settings`)."""
from __future__ import annotations

from dataclasses import dataclass

from ctcbench.core.problem import FLOAT_DTYPES
from ctcbench.datasheet.axes import AXES
from ctcbench.settings import NON_NEGATIVE_INT, POSITIVE, at_least, setting, settings

STAGES = ("limits", "precision", "robustness", "determinism", "speed")  # in the order they run
SHARE = {"limits": 0.6, "precision": 0.4}  # of --budget, per backend


@dataclass(frozen=True)
class DatasheetSettings:
    dtypes: tuple[str, ...] = setting(
        (), "Dtypes of every stage, by default float32 for the limits, repeat calls and speed "
            "and every dtype the backend takes for precision.",
        choices=lambda: FLOAT_DTYPES, option="--dtype", metavar="DTYPE")
    budget: float = setting(
        120.0, f"Seconds per backend for the limits ({SHARE['limits']:.0%}) and the precision "
               f"search ({SHARE['precision']:.0%}).", check=POSITIVE)
    timeout: float = setting(60.0, "The most one probe may take, in seconds; longer is a hang.",
                             check=POSITIVE)
    max_memory_mb: int = setting(2048, "Sizes estimated to need more memory are not run.",
                                 check=at_least(1), option="--max-memory", metavar="MB")
    stages: tuple[str, ...] = setting(STAGES, "Stages to run.", choices=lambda: STAGES,
                                      metavar="STAGE")
    axes: tuple[str, ...] = setting(tuple(AXES), "Axes of the limits.", choices=lambda: AXES,
                                    metavar="AXIS")
    seed: int = setting(0, "Seed of the problems and of the precision search.",
                        check=NON_NEGATIVE_INT)
    repeat: int = setting(3, "Timed measurements per speed size.", check=at_least(1))
    trials: int | None = setting(
        None, "The most candidates of the precision search per dtype (the budget may end it "
              "first); with a count, the same seed makes the same search on any machine where "
              "no candidate times out [default: as many as the budget allows].",
        check=at_least(1), metavar="N")

    @property
    def max_bytes(self) -> int:
        return self.max_memory_mb * 2**20


def datasheet_settings():
    """Every setting of the datasheet (for ``SettingsCommand``)."""
    return settings(DatasheetSettings)


def command_line(config: dict) -> str:
    """The options that remake the settings in ``config`` (a run's stored settings): every
    number that is set, and the lists that are not their default."""
    words = []
    for s in datasheet_settings():
        value = config.get(s.key, s.default)
        if s.many and tuple(value) != tuple(s.default):
            words += [s.option, ",".join(value)]
        elif not s.many and value is not None:
            words += [s.option, f"{value:g}" if isinstance(value, float) else str(value)]
    return " ".join(words)
