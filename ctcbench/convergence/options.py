"""Command-line options of ``ctcbench convergence``, generated from the config dataclasses.

Each setting (see :mod:`ctcbench.convergence.config`) becomes ``--field-name`` (or the option
its field names), with the field's type, default and help; booleans become
``--name/--no-name``; grid settings take a comma list. Choices shown in the help come from the
real tables. Values are only parsed here; they are checked once, by ``check_run``.

The options are made when the command is first used (``SettingsCommand``), since the tables
live next to torch code and ``ctcbench --help`` must not import torch.
"""
from __future__ import annotations

import click
from click.core import ParameterSource

from ctcbench.cli_types import Number
from ctcbench.convergence.config import list_problem


def run_settings():
    """``runconfig.run_settings()``, imported on first use: it brings torch, which
    ``ctcbench --help`` does without."""
    from ctcbench.convergence.runconfig import run_settings as every_setting
    return every_setting()


def comma_list(kind):
    """A click callback parsing ``a,b,c`` into a tuple of ``kind``, naming the option on error."""
    def parse(ctx, param, value):
        try:
            items = tuple(kind(v.strip()) for v in str(value).split(",") if v.strip())
        except ValueError:
            words = {int: "whole numbers", float: "numbers"}.get(kind, kind.__name__)
            raise click.BadParameter(f"expected a comma-separated list of {words}, "
                                     f"got {value!r}") from None
        problem = list_problem(items)
        if problem:
            raise click.BadParameter(f"expected {problem}, got {value!r}")
        return items
    return parse


def setting_option(s) -> click.Option:
    """The click option of one ``Setting``."""
    choices = "|".join(s.choices()) if s.choices is not None else None
    if s.grid:
        return click.Option([s.option, s.param], default=str(s.default), show_default=True,
                            callback=comma_list(s.type),
                            metavar=(choices or s.type.__name__.upper()) + "[,...]",
                            help=f"{s.help} A comma list runs each.")
    if s.type is bool:
        return click.Option([f"{s.option}/--no-{s.option[2:]}", s.param], default=s.default,
                            show_default=True, help=s.help)
    kind = Number(s.type) if s.type in (int, float) else s.type
    return click.Option([s.option, s.param], type=kind, default=s.default, show_default=True,
                        metavar=choices, help=s.help)


def setting_options() -> list[click.Option]:
    """One option per setting; an error if two settings would share an option."""
    options = [setting_option(s) for s in run_settings()]
    names = [o.name for o in options]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise ValueError(f"settings: expected distinct option names, got {', '.join(dup)} twice")
    return options


def config_option() -> click.Option:
    """``--config FILE.toml``; its help lists the keys of each table."""
    tables: dict[str, list[str]] = {}
    for s in run_settings():
        table, _, key = s.key.rpartition(".")
        tables.setdefault(table, []).append(key)
    keys = "; ".join(f"[{t}] " * bool(t) + ", ".join(k) for t, k in tables.items())
    return click.Option(["--config", "config_file"], type=click.Path(dir_okay=False), default=None,
                        metavar="FILE.toml",
                        help=f"Settings from a TOML file (example above); options given on the "
                             f"command line override it. Keys: {keys}.")


class SettingsCommand(click.Command):
    """A command whose setting options and ``--config`` are generated on first use, in front
    of its own options; the callback receives them as keyword arguments."""

    generated = False

    def get_params(self, ctx):
        if not self.generated:
            self.params[:0] = [*setting_options(), config_option()]
            self.generated = True
        return super().get_params(ctx)


def command_line_settings(ctx: click.Context) -> dict:
    """``{key: value}`` of the settings given explicitly on the command line."""
    return {s.key: ctx.params[s.param] for s in run_settings()
            if ctx.get_parameter_source(s.param) == ParameterSource.COMMANDLINE}


def option_names() -> dict[str, str]:
    """Setting key -> option name (``data.seed`` -> ``--data-seed``)."""
    return {s.key: s.option for s in run_settings()}
