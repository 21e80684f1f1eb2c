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
import typing
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, Callable

from ctcbench import errors
from ctcbench.errors import InputError

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


def settings(cls, prefix: str = "") -> list[Setting]:
    """Every non-derived leaf field of the config dataclass ``cls``, nested ones included
    (``runconfig.run_settings()``: those of a whole run)."""
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
