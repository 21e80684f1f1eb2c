"""The ``ctcbench`` command line: thin commands over library functions.

Library errors become ``click.ClickException`` here and nowhere else. Heavy imports
happen inside commands, so ``ctcbench --help`` stays instant.
"""
from __future__ import annotations

import dataclasses
import functools

import click

from ctcbench import __version__


def format_option(*choices: str):
    """Shared ``--format`` option; the first choice is the default."""
    return click.option("--format", "fmt", type=click.Choice(choices), default=choices[0],
                        show_default=True, help="Output for people (table) or machines.")


def library_errors(fn):
    """Turn the library's ValueError/KeyError into one clean CLI error line."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except (ValueError, KeyError, FileNotFoundError) as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            raise click.ClickException(str(message)) from None
    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ctcbench")
def cli():
    """Benchmark, cross-check and debug CTC loss implementations."""


@cli.command()
@format_option("table", "json")
def backends(fmt):
    """List CTC backends, whether each runs here, and how to install what is missing."""
    from ctcbench.registry import list_backends
    from ctcbench.results import to_json
    infos = list_backends()
    if fmt == "json":
        click.echo(to_json([dataclasses.asdict(i) for i in infos], indent=2))
        return
    width = max(len(i.name) for i in infos)
    for i in infos:
        status = "available" if i.available else "unavailable"
        why = "" if i.available else f"  {i.reason}" + (f" -> {i.hint}" if i.hint else "")
        click.echo(f"{i.name:<{width}}  {status:<11}  {i.source:<7}{why}")


def main():
    cli()
