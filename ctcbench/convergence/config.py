"""What is convergence's own about its settings: reading and comparing a resumed folder's
stored config. The settings are declared on ``TrainConfig`` and ``ModelConfig``
(trainconfig.py) and ``DataConfig`` (data.py) with :func:`ctcbench.settings.setting`, choices
returning the real tables (``OPTIMIZERS``, ``MODELS``, ``DATASETS``); from that one declaration
come the command-line options, the keys of a ``--config`` file, the checks
(``check_config``, the one path every ``check()`` takes) and the comparison with a stored
config when a run folder is resumed (``runconfig.config_conflicts``).

A setting's key is its field name, dotted below the training config: ``lr``,
``model.channels``, ``data.seed``. The grid settings (``optimizer``, ``lr``, ``seed``,
``model.name``) take one value or a list: one run per combination.

A ``--config`` file is TOML with the same keys, the model and data settings in ``[model]`` and
``[data]`` tables (an example: ``ctcbench convergence --help``).
Options given on the command line override the file; unknown keys and values of the wrong
type are errors naming the file and the key.
"""
from __future__ import annotations

import math


# -- resuming ----------------------------------------------------------------------------
def stored_config(run_dir) -> dict | None:
    """The ``config`` a convergence run folder was started with (from its meta.json), or
    ``None`` when there is none to read (``run_grid`` then says why it cannot resume)."""
    from ctcbench.runs.store import read_meta
    try:
        config = (read_meta(run_dir) or {}).get("config")
    except (OSError, ValueError):
        return None
    ok = isinstance(config, dict) and isinstance(config.get("base"), dict) and isinstance(
        config.get("grid"), dict)
    return config if ok else None


def same_value(typ: type, stored, given) -> bool:
    if typ is float:  # JSON keeps floats exactly, but spells inf and nan as strings
        try:
            a, b = float(stored), float(given)
        except (TypeError, ValueError):
            return False
        return a == b or (math.isnan(a) and math.isnan(b))
    return stored == given


def show(values: list) -> str:
    """Values the way the command line takes them: ``0.001``, ``adam,rmsprop``, ``true``."""
    return ",".join(str(v).lower() if isinstance(v, bool) else str(v) for v in values)
