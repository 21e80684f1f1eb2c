"""A driver's settings, declared once on a dataclass: each field made with :func:`setting`
holds its default, help, check and choices, and from that one declaration come the command-line
options (:class:`SettingsCommand`), the checks (:func:`check_config`) and docs/cli.md (which
is the commands' help).

A setting's key is its field name, dotted below nested dataclasses (``model.channels``). Its
option is ``--field-name`` unless the field names another. A field typed ``tuple[str, ...]``
takes a list (``--stages a,b`` or ``--stages a --stages b``); ``int | None`` may be left unset.
Each driver with settings declares them in its ``config.py`` (convergence's in the modules of
its run's parts, ``ctcbench.convergence.config`` reads them back).
"""
from __future__ import annotations

import difflib
import functools
import math
import types
import typing
from dataclasses import dataclass, field, fields, is_dataclass, replace
from typing import Any, Callable

import click
from click.core import ParameterSource

from ctcbench import errors
from ctcbench.cli_types import Number
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


# -- declaring -----------------------------------------------------------------------------
def setting(default, help: str, *, check: tuple[Callable[[Any], bool], str] | None = None,
            choices: Callable[[], typing.Iterable[str]] | None = None, option: str | None = None,
            metavar: str | None = None, grid: str | None = None, derived: bool = False,
            click_type: click.ParamType | None = None, flag: bool = False):
    """A settings dataclass field with what the CLI, a config file and the checks need.

    ``check``: ``(predicate, expected text)``; ``choices``: returns the table whose keys are the
    allowed values (of each item, for a list); ``option``: the option name when not
    ``--field-name``; ``grid``: the convergence ``Grid`` field the setting fills (its option
    takes a list, one run per value); ``derived``: set from other settings (no option, not a
    config-file key, not checked); ``click_type``: the option's type where the field's says
    too little (a path; a value refused as the command line is parsed, a usage error);
    ``flag``: a bool option given bare (``--strict``), without a ``--no-`` form.
    """
    return field(default=default, metadata={
        "help": help, "check": check, "choices": choices, "option": option, "metavar": metavar,
        "grid": grid, "derived": derived, "click_type": click_type, "flag": flag})


def at_least(n, note: str = ""):
    return (lambda v: v >= n, f">= {n}{note}")


NON_NEGATIVE = (lambda v: v >= 0 and math.isfinite(v), "a finite value >= 0")
NON_NEGATIVE_INT = (lambda v: v >= 0, "a non-negative integer")
POSITIVE = (lambda v: v > 0 and math.isfinite(v), "a finite positive number")


def in_unit_interval(closed: bool):
    if closed:
        return (lambda v: 0 <= v <= 1, "a value in [0, 1]")
    return (lambda v: 0 <= v < 1, "a value in [0, 1)")


@dataclass(frozen=True)
class Setting:
    """One leaf field of a settings dataclass, as the CLI and a config file see it."""

    key: str  # dotted: "lr", "model.channels", "data.seed"
    option: str  # "--lr", "--channels", "--data-seed"
    type: type  # int, float, str or bool; of each item when ``many``
    default: Any
    help: str
    grid: str | None  # the Grid field it fills, for convergence's grid settings
    choices: Callable[[], typing.Iterable[str]] | None
    check: tuple[Callable[[Any], bool], str] | None
    many: bool = False  # a tuple of values, repeated or comma-separated on the command line
    optional: bool = False  # None allowed: not set
    metavar: str | None = None
    click_type: click.ParamType | None = None  # the option's type, where given
    flag: bool = False  # a bare flag: no --no- form

    @property
    def param(self) -> str:
        """The click parameter name: the option without dashes, in snake case."""
        return self.option[2:].replace("-", "_")


@functools.lru_cache(maxsize=None)
def type_hints(cls) -> dict:
    return typing.get_type_hints(cls)


def _leaf_type(typ) -> tuple[type, bool, bool]:
    """``(item type, many, optional)`` of a field's annotation."""
    args = typing.get_args(typ)
    if typing.get_origin(typ) in (typing.Union, types.UnionType) and type(None) in args:
        inner, many, _ = _leaf_type(next(a for a in args if a is not type(None)))
        return inner, many, True
    if typing.get_origin(typ) is tuple:
        return args[0], True, False
    return typ, False, False


def settings(cls, prefix: str = "") -> list[Setting]:
    """Every non-derived leaf field of the settings dataclass ``cls``, nested ones included."""
    out = []
    for f in fields(cls):
        typ = type_hints(cls)[f.name]
        if is_dataclass(typ):
            out += settings(typ, f"{prefix}{f.name}.")
            continue
        meta = f.metadata
        if meta.get("derived"):
            continue
        kind, many, optional = _leaf_type(typ)
        option = meta.get("option") or "--" + f.name.replace("_", "-")
        out.append(Setting(key=prefix + f.name, option=option, type=kind, default=f.default,
                           help=meta.get("help", ""), grid=meta.get("grid"),
                           choices=meta.get("choices"), check=meta.get("check"), many=many,
                           optional=optional, metavar=meta.get("metavar"),
                           click_type=meta.get("click_type"), flag=meta.get("flag", False)))
    return out


# -- checking ------------------------------------------------------------------------------
def type_ok(typ: type, value) -> bool:
    if typ is bool:
        return isinstance(value, bool)
    if isinstance(value, bool):  # True is an int to Python, not to a config
        return False
    return isinstance(value, (int, float)) if typ is float else isinstance(value, typ)


def list_problem(values: tuple) -> str | None:
    """What is wrong with a list setting's values, or ``None``."""
    if not values:
        return "at least one value"
    if len(set(values)) < len(values):  # two runs would share one run folder
        return "distinct values"
    return None


def check_value(s: Setting, value) -> None:
    """One value of setting ``s`` (one item of a list setting): its type, choices, check."""
    if s.optional and value is None:
        return
    expect(type_ok(s.type, value), s.key, TYPE_NAMES[s.type], value)
    if s.choices is not None:
        table = list(s.choices())
        if value not in table:
            near = difflib.get_close_matches(str(value), table, n=1, cutoff=0.6)
            raise ConfigError(s.key, f"expected {'some' if s.many else 'one'} of "
                                     f"{', '.join(table)}, got {value!r}"
                              + (f" (did you mean {near[0]!r}?)" if near else ""))
    if s.check is not None:
        ok, expected = s.check
        expect(ok(value), s.key, expected, value)


def check_setting(s: Setting, value) -> None:
    """The whole value of ``s``: each item of a list (an empty list only where that is the
    default), else the one value."""
    if not s.many:
        return check_value(s, value)
    expect(isinstance(value, (tuple, list)), s.key, f"a list, each {TYPE_NAMES[s.type]}", value)
    problem = list_problem(tuple(value))
    if problem and (value or s.default):
        expect(False, s.key, problem, value)
    for v in value:
        check_value(s, v)


def check_config(cfg, prefix: str = ""):
    """Check every setting of the dataclass ``cfg``, nested ones too, then its ``relations()``
    (checks across fields: ``(field, holds, expected, got)`` tuples); raise ``ConfigError``
    naming the first bad key. Returns ``cfg``."""
    for s in settings(type(cfg)):
        if "." not in s.key:
            check_setting(replace(s, key=prefix + s.key), getattr(cfg, s.key))
    for f in fields(cfg):
        if is_dataclass(getattr(cfg, f.name)):
            check_config(getattr(cfg, f.name), f"{prefix}{f.name}.")
    for name, ok, expected, got in (cfg.relations() if hasattr(cfg, "relations") else []):
        expect(ok, prefix + name, expected, got)
    return cfg


def from_options(cls, options: dict, name: str):
    """``cls(**options)``, checked: the keyword arguments a library function took for the
    settings ``cls`` declares (``name``, the function, in the error for an unknown one); a
    list may be any sequence, and one value stands for a list of one."""
    known = {s.key: s for s in settings(cls) if "." not in s.key}
    errors.one_of(name, [f"{k}=" for k in options], [f"{k}=" for k in known])
    values = {}
    for key, value in options.items():
        if known[key].many and value is None:  # None: the default
            continue
        if known[key].many and isinstance(value, list):
            value = tuple(value)
        elif known[key].many and not isinstance(value, tuple):
            value = (value,)
        values[key] = value
    return check_config(cls(**values))


# -- the command line ----------------------------------------------------------------------
def split_list(values, kind: type = str, item: str = "VALUE") -> tuple:
    """``("a,b", "c")`` (repeats of an option) or ``"a,b,c"`` -> ``(a, b, c)`` of ``kind``;
    ``ValueError`` saying what was expected (``item[,item...]``) for a blank or unparsable
    value."""
    values = (values,) if isinstance(values, str) else tuple(values)
    items = []
    for value in values:
        parts = [v.strip() for v in str(value).split(",") if v.strip()]
        if not parts:
            raise ValueError(f"{item}[,{item}...], got {value!r}")
        try:
            items += [kind(p) for p in parts]
        except ValueError:
            words = {int: "whole numbers", float: "numbers"}.get(kind, kind.__name__)
            raise ValueError(f"a comma-separated list of {words}, got {value!r}") from None
    return tuple(items)


def list_callback(kind: type = str, item: str = "VALUE", *, distinct: bool = False):
    """A click callback parsing a list option with :func:`split_list`; with ``distinct``, a
    value given twice is refused, as the user wrote it."""
    def parse(ctx, param, value):
        try:
            items = split_list(value, kind, item)
        except ValueError as exc:
            raise click.BadParameter(f"expected {exc}", param=param) from None
        if distinct and len(set(items)) < len(items):
            raise click.BadParameter(f"expected distinct values, got {','.join(value)!r}",
                                     param=param)
        return items
    return parse


def setting_option(s: Setting) -> click.Option:
    """The click option of one ``Setting``."""
    choices = "|".join(s.choices()) if s.choices is not None else None
    metavar = s.metavar or choices
    if s.metavar and choices and (not s.many or tuple(s.choices()) != tuple(s.default)):
        s = replace(s, help=f"{s.help} {'Some' if s.many else 'One'} of {choices.replace('|', ', ')}.")
    if s.many or s.grid:
        item = metavar or s.type.__name__.upper()
        shown = ",".join(map(str, s.default)) if s.many else str(s.default)
        note = " A comma list runs each." if s.grid else ""
        default = tuple(map(str, s.default)) if s.many else (str(s.default),)
        return click.Option([s.option, s.param], multiple=True,
                            callback=list_callback(s.type, item, distinct=True),
                            default=default, metavar=f"{item}[,...]",
                            help=f"{s.help}{note}" + f" [default: {shown}]" * bool(shown))
    if s.flag:
        return click.Option([s.option, s.param], is_flag=True, default=s.default, help=s.help)
    if s.type is bool:
        return click.Option([f"{s.option}/--no-{s.option[2:]}", s.param], default=s.default,
                            show_default=True, help=s.help)
    kind = s.click_type or (Number(s.type) if s.type in (int, float) else s.type)
    return click.Option([s.option, s.param], type=kind, default=s.default,
                        show_default=s.default is not None, metavar=metavar, help=s.help)


class SettingsCommand(click.Command):
    """A command whose setting options are generated from ``settings()`` (a function: the
    tables behind choices may import heavy code, which ``ctcbench --help`` does without) on
    first use, in front of its own options, with ``extra()`` options after them."""

    def __init__(self, *args, settings: Callable[[], typing.Iterable[Setting]],
                 extra: Callable[[], list[click.Option]] = list, **kwargs):
        super().__init__(*args, **kwargs)
        self.settings, self.extra, self.generated = settings, extra, False

    def get_params(self, ctx):
        if not self.generated:
            options = [setting_option(s) for s in self.settings()]
            names = [o.name for o in options]
            dup = sorted({n for n in names if names.count(n) > 1})
            if dup:
                raise ValueError(f"settings: expected distinct option names, got "
                                 f"{', '.join(dup)} twice")
            self.params[:0] = [*options, *self.extra()]
            self.generated = True
        return super().get_params(ctx)

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except ConfigError as exc:  # a setting's key: named by its option
            options = {s.key: s.option for s in self.settings()}
            raise click.ClickException(exc.named(options.get(exc.key, exc.key))) from None


def command_line_settings(ctx: click.Context, every: typing.Iterable[Setting]) -> dict:
    """``{key: value}`` of the settings given explicitly on the command line."""
    return {s.key: ctx.params[s.param] for s in every
            if ctx.get_parameter_source(s.param) == ParameterSource.COMMANDLINE}
