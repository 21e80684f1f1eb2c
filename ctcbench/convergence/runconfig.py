"""The settings of a whole convergence run, assembled on ``TrainConfig`` and ``Grid``: the
table of every setting, a run built from ``{key: value}`` and checked before any file is
written, a ``--config`` TOML file read, and what a resumed folder's stored config says
against the settings given now. The declarations themselves are in ``config``."""
from __future__ import annotations

import tomllib
from dataclasses import replace
from pathlib import Path
from typing import Any

from ctcbench.errors import UnknownName
from ctcbench.convergence.config import same_value, show
from ctcbench.settings import (TYPE_NAMES, ConfigError, Setting, check_value, expect, list_problem,
                               type_ok)
from ctcbench.convergence.ctc import ctc_loss_fn
from ctcbench.convergence.grid import Grid
from ctcbench.convergence.train import check_fits
from ctcbench.convergence.trainconfig import TrainConfig, run_settings
from ctcbench.files import read_text
from ctcbench.runtime.protocol import BackendUnavailable


def setting_table() -> dict[str, Setting]:
    """``run_settings()`` by key."""
    return {s.key: s for s in run_settings()}


def build(values: dict[str, Any]):
    """``(TrainConfig, Grid)`` from ``{key: value}`` (grid keys hold tuples); settings not in
    ``values`` keep their dataclass defaults. Nothing is checked here."""
    base, grid = TrainConfig(), {}
    for s in run_settings():
        if s.grid:
            grid[s.grid] = tuple(values.get(s.key, (s.default,)))
        elif s.key in values:
            *parents, name = s.key.split(".")
            target = base
            for part in parents:
                target = getattr(target, part)
            setattr(target, name, values[s.key])
    return base, Grid(**grid)


def check_run(base, grid) -> None:
    """Everything ``run_grid`` would refuse, checked before any file is written: every grid
    value, the base config, each configuration of the grid, whether the data fits each
    model, and whether the CTC backend runs here. Raises ``ConfigError``."""
    for s in run_settings():
        if s.grid:
            values = getattr(grid, s.grid)
            problem = list_problem(values)
            expect(problem is None, s.key, problem, values)
            for v in values:
                check_value(s, v)
    base.check()
    try:
        grid.configs(base)
    except ConfigError:
        raise
    except ValueError as exc:  # "lr: expected rates that differ ...": keep the key for the CLI
        key, _, problem = str(exc).partition(": ")
        if key not in setting_table():
            raise
        raise ConfigError(key, problem) from None
    for name in grid.models:
        check_fits(replace(base, model=replace(base.model, name=name)))
    try:
        ctc_loss_fn(base.ctc_backend, reduction=base.reduction)
    except UnknownName as exc:
        raise ConfigError("ctc_backend", exc.problem) from None
    except BackendUnavailable as exc:
        raise ConfigError("ctc_backend", str(exc)) from None


# -- config files ------------------------------------------------------------------------
def load_toml(path) -> dict[str, Any]:
    """A ``--config`` file as ``{key: value}`` (grid keys hold tuples), each value of its
    setting's type; errors name the file and the key (the format: ``config``'s docstring)."""
    path = Path(path)
    if not path.is_file():
        raise ValueError(f"--config: expected an existing TOML file, got {str(path)!r}")
    try:
        data = tomllib.loads(read_text(path, str(path)))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: expected TOML, got a syntax error ({exc})") from None
    table = setting_table()
    values: dict[str, Any] = {}

    def walk(d: dict, prefix: str) -> None:
        known = sorted({k[len(prefix):].split(".")[0] for k in table if k.startswith(prefix)})
        for name, value in d.items():
            key = prefix + name
            is_table = f"{key}." in {k[: len(key) + 1] for k in table}
            if isinstance(value, dict) and is_table:
                walk(value, key + ".")
                continue
            if is_table:  # model = "crnn": the table's key written as a value
                keys = [k[len(key) + 1:] for k in table if k.startswith(key + ".")]
                raise ValueError(f"{path}: {key}: expected a [{key}] table (its keys: "
                                 f"{', '.join(keys)}), got {value!r}")
            if key not in table:
                where = f"[{prefix[:-1]}] " if prefix else ""
                raise ValueError(f"{path}: {key}: expected a known {where}key "
                                 f"({', '.join(known)}), got an unknown key")
            values[key] = file_value(path, table[key], value)

    walk(data, "")
    return values


def file_value(path: Path, s: Setting, value):
    """``value`` read for setting ``s`` from ``path``: a tuple for a grid setting; ints as
    floats for float settings."""
    items = value if s.grid and isinstance(value, list) else [value]
    for v in items:
        if not type_ok(s.type, v):
            kind = TYPE_NAMES[s.type] + (" or a list of them" if s.grid else "")
            raise ValueError(f"{path}: {s.key}: expected {kind}, got {value!r}")
    items = [float(v) if s.type is float else v for v in items]
    if not s.grid:
        return items[0]
    problem = list_problem(tuple(items))
    if problem:
        raise ValueError(f"{path}: {s.key}: expected {problem}, got {value!r}")
    return tuple(items)


def config_conflicts(stored: dict, given: dict, *, run_dir=None) -> list[str]:
    """One message per setting in ``given`` whose value differs from the one a run folder
    was started with.

    ``stored``: the folder's meta.json ``config``, ``{"base": TrainConfig as dict,
    "grid": {"optimizers": [...], "lrs": [...], ...}}``; a key missing from it means the
    dataclass default. ``given``: ``{key: value}`` for the settings given explicitly (grid
    keys hold sequences). Messages name the option:
    ``--lr: the run folder X was started with 0.001, got 0.003; drop the option to resume``.
    """
    table = setting_table()
    where = "the run folder" + (f" {run_dir}" if run_dir is not None else "")
    out = []
    for key, value in given.items():
        s = table[key]
        if s.grid:
            was = list(stored.get("grid", {}).get(s.grid, [s.default]))
            now = list(value)
        else:
            was = stored.get("base", {})
            for part in key.split("."):
                was = was.get(part, s.default) if isinstance(was, dict) else s.default
            was, now = [was], [value]
        if len(was) != len(now) or not all(same_value(s.type, a, b) for a, b in zip(was, now)):
            out.append(f"{s.option}: {where} was started with {show(was)}, got {show(now)}; "
                       f"drop the option to resume")
    return out
