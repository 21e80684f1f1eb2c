"""The settings of ``ctcbench bench``, declared once (:mod:`ctcbench.settings`): its options,
the library's checks and docs/cli.md are made from ``BenchSettings``."""
from __future__ import annotations

from dataclasses import dataclass

from ctcbench.runtime.sizes import DTYPES, GRIDS
from ctcbench.runtime.threads import count_check
from ctcbench.runtime.timing import BETWEEN_CALLS
from ctcbench.settings import NON_NEGATIVE_INT, at_least, setting, settings


@dataclass(frozen=True)
class BenchSettings:
    grid: str = setting("default", "Named size grid, or a JSON/CSV file of T,N,C,L rows.",
                        metavar="|".join(GRIDS) + "|FILE")
    repeat: int = setting(5, "Timed measurements per backend and size (after the warm-up).",
                          check=at_least(1))
    warmup: int = setting(1, "Untimed calls per backend and size before the timed ones (the "
                             "first is the first_call_s column).", check=NON_NEGATIVE_INT)
    threads: tuple[int, ...] = setting(
        (1,), "Threads for every backend (torch, numba, the frameworks' pools); a list such as "
              "1,2 measures each count (one row per count, thread-scaling plot).",
        check=count_check(), metavar="N")
    dtype: str = setting("float64", "Logits dtype handed to every backend.",
                         choices=lambda: DTYPES)
    seed: int = setting(0, "Seed of every size's logits and targets.", check=NON_NEGATIVE_INT)
    between_calls: str = setting(
        "nothing", "What runs between two timed calls, untimed: nothing (back to back) or "
                   "model-step (three arrays of the logits' size, 32 MiB at least, allocated, "
                   "written and freed, as a training step's model does around the loss: fresh "
                   "memory and cold caches for the next call). Loss backends only.",
        choices=lambda: BETWEEN_CALLS)


def bench_settings():
    """Every setting of bench (for ``SettingsCommand``)."""
    return settings(BenchSettings)
