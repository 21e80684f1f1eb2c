"""Command-line options of ``ctcbench convergence``, generated from the config dataclasses.

Each setting (see :mod:`ctcbench.convergence.config`) becomes ``--field-name`` (or the option
its field names) by :class:`ctcbench.settings.SettingsCommand`; this module adds
``--config FILE.toml`` and the renaming of keys to options. Values are only parsed here; they
are checked once, by ``check_run``.
"""
from __future__ import annotations

import click

from ctcbench import settings
from ctcbench.cli_types import Path


def run_settings():
    """``trainconfig.run_settings()``, imported on first use: ``ctcbench --help`` builds no
    convergence option (``convergence --help`` does, without torch)."""
    from ctcbench.convergence.trainconfig import run_settings as every_setting
    return every_setting()


def config_option() -> list[click.Option]:
    """``--config FILE.toml``; its help lists the keys of each table."""
    tables: dict[str, list[str]] = {}
    for s in run_settings():
        table, _, key = s.key.rpartition(".")
        tables.setdefault(table, []).append(key)
    keys = "; ".join(f"[{t}] " * bool(t) + ", ".join(k) for t, k in tables.items())
    return [click.Option(["--config", "config_file"], type=Path(dir_okay=False),
                         default=None, metavar="FILE.toml",
                         help=f"Settings from a TOML file (example above); options given on "
                              f"the command line override it. Keys: {keys}.")]


def command_line_settings(ctx: click.Context) -> dict:
    """``{key: value}`` of the settings given explicitly on the command line."""
    return settings.command_line_settings(ctx, run_settings())

