"""The settings of ``ctcbench fuzz``, declared once (:mod:`ctcbench.settings`): its options,
the library's checks and docs/cli.md are made from ``FuzzSettings``."""
from __future__ import annotations

from dataclasses import dataclass

from ctcbench.cluster import EXECUTORS
from ctcbench.runtime.registry import REFERENCE
from ctcbench.settings import NON_NEGATIVE_INT, POSITIVE, at_least, setting, settings

FUZZ_DTYPES = ("float64", "float32", "float16", "bfloat16")  # what --dtype may ask for
DEFAULT_DTYPES = ("float64", "float32")  # drawn without --dtype


@dataclass(frozen=True)
class FuzzSettings:
    against: str = setting(REFERENCE, "Backend taken as right (the float64 reference by "
                                      "default).", metavar="NAME")
    budget: float = setting(60.0, "Seconds of search (shrinking a find comes on top).",
                            check=POSITIVE)
    seed: int = setting(0, "Seed of the search; the same seed draws the same problems.",
                        check=NON_NEGATIVE_INT)
    dtypes: tuple[str, ...] = setting(
        (), f"Draw only these dtypes; by default {' and '.join(DEFAULT_DTYPES)}, as far as the "
            f"backend takes them.", choices=lambda: FUZZ_DTYPES, option="--dtype",
        metavar="DTYPE")
    executor: str = setting("local", "Where the search runs: here, or a campaign of --jobs "
                                     "searches at once on a Dask LocalCluster of --jobs "
                                     "workers (needs ctcbench[dask]).", choices=lambda: EXECUTORS)
    scheduler: str | None = setting(
        None, "A campaign on this running Dask scheduler, one search per worker (or --jobs); "
              "its workers must share the run folder's filesystem.", metavar="tcp://HOST:PORT")
    jobs: int | None = setting(
        None, "Searches at once, each on its own seed, with --executor dask-local [default: "
              "min(2, CPUs)] or --scheduler [default: its workers].", check=at_least(1))


def fuzz_settings():
    """Every setting of fuzz (for ``SettingsCommand``)."""
    return settings(FuzzSettings)
