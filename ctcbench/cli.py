"""The ``ctcbench`` command line: thin commands over library functions. The doctor's and the
drivers' commands are in ``ctcbench/<package>/command.py``, added here (``COMMAND_PACKAGES``).

Library errors become one ``Error:`` line here and nowhere else (``Commands``). Heavy imports
happen inside commands, so ``ctcbench --help`` stays instant.
"""
from __future__ import annotations

import dataclasses
import importlib
import os
import sys
from pathlib import Path

import click

from ctcbench import __version__
from ctcbench.cli_options import case_dirs_option, format_option
from ctcbench.cli_types import Path as PathType, path_message
from ctcbench.drivers import DRIVERS
from ctcbench.errors import InputError


LIBRARY_ERRORS = (ValueError, KeyError, OSError, RuntimeError)  # what the library raises for
# a bad argument, a file it cannot use or a backend that cannot run (BackendUnavailable)


class Commands(click.Group):
    """The command group: any library error, whichever command raised it, reaches the user as
    one line (``Error: ...``, exit 1) instead of a traceback; this is the one place that does it."""

    def invoke(self, ctx):
        try:
            return super().invoke(ctx)
        except click.BadParameter as exc:  # an option's value: --NAME: expected ..., got ...
            if exc.param is None or not exc.param.opts:
                raise
            message = exc.message
            if isinstance(exc.param.type, click.Path):
                message = path_message(exc.param.type, message)
            name = (exc.param.opts[0] if isinstance(exc.param, click.Option)
                    else exc.param.human_readable_name.rstrip("."))  # an argument: RUN_DIR
            raise click.UsageError(f"{name}: {message}", exc.ctx) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except BrokenPipeError:  # `ctcbench cases | head`: the reader has all it wanted; as
            # Python's docs advise, stdout goes to devnull so that its flush at exit is quiet
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            raise SystemExit(1) from None
        except InputError as exc:  # the library's argument, renamed to the option it came from
            raise click.ClickException(exc.named(self._option(ctx, exc.name))) from None
        except LIBRARY_ERRORS as exc:
            raise click.ClickException(self._message(exc)) from None

    @staticmethod
    def _message(exc: Exception) -> str:
        """A library error's one line; an OS error on a path (``[Errno 36] File name too
        long``, Python's words) said in the error form, naming the path."""
        if isinstance(exc, OSError) and exc.strerror and exc.filename is not None:
            path = str(exc.filename)
            path = path if len(path) <= 120 else path[:60] + "..." + path[-40:]
            return f"{path}: expected a path this system can use, got {exc.strerror!r}"
        message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
        return str(message) or type(exc).__name__

    def _option(self, ctx, name: str) -> str:
        """``--backend`` for the library's ``backend`` when the command has that option."""
        command = self.get_command(ctx, ctx.invoked_subcommand or "")
        flag = "--" + name.replace("_", "-")
        opts = {o for p in getattr(command, "params", ()) for o in p.opts}
        return flag if flag in opts else name


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="ctcbench")
def cli():
    """Benchmark, cross-check and debug CTC loss implementations."""
    from ctcbench.progress import interval
    from ctcbench.runtime.threads import requested
    requested()  # the environment's settings, checked once before any command's work: one
    interval()  # line naming the variable, not a row per backend or a value ignored


@cli.command()
@format_option("table", "json")
def backends(fmt):
    """List CTC backends, whether each runs here, and how to install what is missing."""
    from ctcbench.files import to_json
    from ctcbench.runtime.registry import list_backends
    infos = list_backends()
    if fmt == "json":
        return click.echo(to_json([dataclasses.asdict(i) for i in infos], indent=2))
    width = max(len(i.name) for i in infos)
    for i in infos:
        status = "available" if i.available else "unavailable"
        why = "" if i.available else f"  {i.reason}" + (f" -> {i.hint}" if i.hint else "")
        if i.nondeterministic is not None:
            why += f"  nondeterministic (two calls within {i.nondeterministic:g})"
        click.echo(f"{i.name:<{width}}  {status:<11}  {i.source:<7}{why}")


@cli.command("cases")
@case_dirs_option("list")
@format_option("table", "json")
def cases_cmd(case_dirs, fmt):
    """List the edge cases: family, oracle, dtypes and what each one checks; then, from the
    built-in library, the decoder and aligner cases (cases/decoders/)."""
    from ctcbench.caselib.decoder_cases import describe_decoder_cases, load_decoder_cases
    from ctcbench.caselib.library import describe, load_cases
    from ctcbench.compare.checks import prepare_all
    from ctcbench.files import to_json
    cases = load_cases(case_dirs or None)
    prepare_all(cases)  # built and answered as compare would: its errors are reported here too
    rows = describe(cases)
    rows += [] if case_dirs else describe_decoder_cases(load_decoder_cases())
    if fmt == "json":
        return click.echo(to_json(rows, indent=1))
    names = [f"{r['family']}/{r['name']}" for r in rows]
    dtypes = [",".join(r["dtypes"]) for r in rows]
    width, dwidth = max(len(n) for n in names), max(len(d) for d in dtypes)
    for name, dt, r in zip(names, dtypes, rows):
        click.echo(f"{name:<{width}}  {r['oracle']:<12}  {dt:<{dwidth}}  {r['description']}")


@cli.command(help=f"Write one self-contained HTML page for run folders of any kind "
                  f"({', '.join(DRIVERS)}), side by side; several folders need --out.")
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...",
                type=PathType(file_okay=False))
@click.option("--out", type=PathType(dir_okay=False), default=None,
              help="HTML file to write, required for several folders [default: "
                   "RUN_DIR/report.html for one folder].")
def report(run_dirs, out):
    from ctcbench.drivers import write_report
    click.echo(f"report: {write_report([Path(d) for d in run_dirs], out)}")


COMMAND_PACKAGES = ("doctor", *DRIVERS)  # each has a command.py with its COMMANDS; the doctor
# writes no run folder, so it is no run kind of DRIVERS
for package in COMMAND_PACKAGES:
    for command in importlib.import_module(f"ctcbench.{package}.command").COMMANDS:
        cli.add_command(command)

main = cli  # the console script's entry point (pyproject.toml)
