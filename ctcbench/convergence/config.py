"""The settings of ``ctcbench convergence``, declared once on the config dataclasses.

Every field of ``TrainConfig`` (train.py), ``ModelConfig`` (models.py) and ``DataConfig``
(data.py) is made with :func:`setting`, which records its help, its check, its choices (a
zero-argument function returning the real table: ``OPTIMIZERS``, ``MODELS``, ``DATASETS``),
and, where it is not ``--field-name``, its option. From that one declaration come the
command-line options (:mod:`ctcbench.convergence.options`), the keys of a ``--config`` file,
the checks (:func:`check_config`, the one path every ``check()`` takes) and the comparison
with a stored config when a run folder is resumed (:func:`config_conflicts`).

A setting's key is its field name, dotted below the training config: ``lr``,
``model.channels``, ``data.seed``. The grid settings (``optimizer``, ``lr``, ``seed``,
``model.name``) take one value or a list: one run per combination.

A ``--config`` file is TOML with the same keys, the model and data settings in ``[model]`` and
``[data]`` tables (an example: ``ctcbench convergence --help``).
Options given on the command line override the file; unknown keys and values of the wrong
type are errors naming the file and the key.
"""
from __future__ import annotations

import functools
import math
import tomllib
import typing
from dataclasses import dataclass, field, fields, is_dataclass, replace
from pathlib import Path
from typing import Any, Callable

from ctcbench import errors
from ctcbench.errors import InputError
from ctcbench.files import read_text

TYPE_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "true or false"}


class ConfigError(InputError):
    """A setting's value is wrong; ``key`` is its dotted key (``data.min_len``), which the
    command line renames to the option (``--min-len``) or the file key it came from."""

    @property
    def key(self) -> str:
        return self.name


def expect(ok: bool, key: str, expected: str, got) -> None:
    """``ConfigError(key, "expected {expected}, got {got!r}")`` unless ``ok``."""
    errors.expect(ok, key, expected, repr(got), ConfigError)


# -- declaring settings ------------------------------------------------------------------
def setting(default, help: str, *, check: tuple[Callable[[Any], bool], str] | None = None,
            choices: Callable[[], typing.Iterable[str]] | None = None, option: str | None = None,
            grid: str | None = None, derived: bool = False):
    """A config dataclass field with what the CLI, the config file and the checks need.

    ``check``: ``(predicate, expected text)``; ``choices``: returns the table whose keys are the
    allowed values; ``option``: the option name when not ``--field-name``; ``grid``: the
    ``Grid`` field the setting fills (its option takes a comma list); ``derived``: set from
    other settings (no option, not a config-file key, not checked).
    """
    return field(default=default, metadata={"help": help, "check": check, "choices": choices,
                                            "option": option, "grid": grid, "derived": derived})


def at_least(n, note: str = ""):
    return (lambda v: v >= n, f">= {n}{note}")


NON_NEGATIVE = (lambda v: v >= 0 and math.isfinite(v), "a value >= 0")
NON_NEGATIVE_INT = (lambda v: v >= 0, "a non-negative integer")
POSITIVE = (lambda v: v > 0 and math.isfinite(v), "a positive number")


def in_unit_interval(closed: bool):
    if closed:
        return (lambda v: 0 <= v <= 1, "a value in [0, 1]")
    return (lambda v: 0 <= v < 1, "a value in [0, 1)")


@dataclass(frozen=True)
class Setting:
    """One leaf field of the training config, as the CLI and the config file see it."""

    key: str  # dotted: "lr", "model.channels", "data.seed"
    option: str  # "--lr", "--channels", "--data-seed"
    type: type  # int, float, str or bool
    default: Any
    help: str
    grid: str | None  # the Grid field it fills, for the comma-list settings
    choices: Callable[[], typing.Iterable[str]] | None
    check: tuple[Callable[[Any], bool], str] | None

    @property
    def param(self) -> str:
        """The click parameter name: the option without dashes, in snake case."""
        return self.option[2:].replace("-", "_")


@functools.lru_cache(maxsize=None)
def type_hints(cls) -> dict:
    return typing.get_type_hints(cls)


def settings(cls=None, prefix: str = "") -> list[Setting]:
    """Every non-derived leaf field of ``cls`` (default ``TrainConfig``), nested ones included."""
    if cls is None:
        from ctcbench.convergence.train import TrainConfig
        cls = TrainConfig
    out = []
    for f in fields(cls):
        typ = type_hints(cls)[f.name]
        if is_dataclass(typ):
            out += settings(typ, f"{prefix}{f.name}.")
            continue
        meta = f.metadata
        if meta.get("derived"):
            continue
        option = meta.get("option") or "--" + f.name.replace("_", "-")
        out.append(Setting(key=prefix + f.name, option=option, type=typ, default=f.default,
                           help=meta.get("help", ""),
                           grid=meta.get("grid"), choices=meta.get("choices"),
                           check=meta.get("check")))
    return out


def setting_table() -> dict[str, Setting]:
    """``settings()`` by key."""
    return {s.key: s for s in settings()}


# -- checking ----------------------------------------------------------------------------
def type_ok(typ: type, value) -> bool:
    if typ is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):  # True is an int to Python, not to a config
        return False
    return isinstance(value, (int, float)) if typ is float else isinstance(value, typ)


def check_value(s: Setting, value) -> None:
    """One value of setting ``s``: its type, its choices, its check."""
    expect(type_ok(s.type, value), s.key, TYPE_NAMES[s.type], value)
    if s.choices is not None:
        table = list(s.choices())
        expect(value in table, s.key, f"one of {', '.join(table)}", value)
    if s.check is not None:
        ok, expected = s.check
        expect(ok(value), s.key, expected, value)


def check_config(cfg, prefix: str = ""):
    """Check every setting of the config dataclass ``cfg``, nested configs too, then its
    ``relations()`` (checks across fields: ``(field, holds, expected, got)`` tuples); raise
    ``ConfigError`` naming the first bad key. Returns ``cfg``. This is the one path behind
    every config's ``check()``."""
    for s in settings(type(cfg)):
        if "." not in s.key:
            check_value(replace(s, key=prefix + s.key), getattr(cfg, s.key))
    for f in fields(cfg):
        if is_dataclass(getattr(cfg, f.name)):
            check_config(getattr(cfg, f.name), f"{prefix}{f.name}.")
    for name, ok, expected, got in (cfg.relations() if hasattr(cfg, "relations") else []):
        expect(ok, prefix + name, expected, got)
    return cfg


def list_problem(values: tuple) -> str | None:
    """What is wrong with a grid setting's list of values, or ``None``."""
    if not values:
        return "at least one value"
    if len(set(values)) < len(values):  # two runs would share one run folder
        return "distinct values"
    return None


def build(values: dict[str, Any]):
    """``(TrainConfig, Grid)`` from ``{key: value}`` (grid keys hold tuples); settings not in
    ``values`` keep their dataclass defaults. Nothing is checked here."""
    from ctcbench.convergence.grid import Grid
    from ctcbench.convergence.train import TrainConfig
    base, grid = TrainConfig(), {}
    for s in settings():
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
    from ctcbench.convergence.ctc import ctc_loss_fn
    from ctcbench.convergence.train import check_fits
    from ctcbench.runtime.protocol import BackendUnavailable
    for s in settings():
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
    except KeyError as exc:
        raise ConfigError("ctc_backend", exc.args[0]) from None
    except BackendUnavailable as exc:
        raise ConfigError("ctc_backend", str(exc)) from None


# -- config files ------------------------------------------------------------------------
def load_toml(path) -> dict[str, Any]:
    """A ``--config`` file as ``{key: value}`` (grid keys hold tuples), each value of its
    setting's type; errors name the file and the key. See the module docstring."""
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
            if isinstance(value, dict) and f"{key}." in {k[: len(key) + 1] for k in table}:
                walk(value, key + ".")
                continue
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
