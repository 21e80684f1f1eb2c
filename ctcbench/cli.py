"""The ``ctcbench`` command line: thin commands over library functions. The drivers' commands
are in ``ctcbench/<driver>/command.py``, added here from the ``DRIVERS`` table.

Library errors become one ``Error:`` line here and nowhere else (``Commands``). Heavy imports
happen inside commands, so ``ctcbench --help`` stays instant.
"""
from __future__ import annotations

import dataclasses
import importlib
from pathlib import Path

import click

from ctcbench import __version__
from ctcbench.cli_options import case_dirs_option, format_option
from ctcbench.cli_types import Number, OneOf
from ctcbench.core.reduction import REDUCTIONS
from ctcbench.doctor.inputs import LAYOUTS
from ctcbench.doctor.load import MAX_BYTES
from ctcbench.doctor.torch_path import DEVICES as TORCH_DEVICES
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
            raise click.UsageError(f"{exc.param.opts[0]}: {exc.message}", exc.ctx) from None
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except InputError as exc:  # the library's argument, renamed to the option it came from
            raise click.ClickException(exc.named(self._option(ctx, exc.name))) from None
        except LIBRARY_ERRORS as exc:
            message = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
            raise click.ClickException(str(message) or type(exc).__name__) from None

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
    """List the edge cases: family, oracle, dtypes and what each one checks."""
    from ctcbench.caselib.library import describe, load_cases
    from ctcbench.compare.checks import prepare_all
    from ctcbench.files import to_json
    cases = load_cases(case_dirs or None)
    prepare_all(cases)  # built and answered as compare would: its errors are reported here too
    rows = describe(cases)
    if fmt == "json":
        return click.echo(to_json(rows, indent=1))
    names = [f"{r['family']}/{r['name']}" for r in rows]
    dtypes = [",".join(r["dtypes"]) for r in rows]
    width, dwidth = max(len(n) for n in names), max(len(d) for d in dtypes)
    for name, dt, r in zip(names, dtypes, rows):
        click.echo(f"{name:<{width}}  {r['oracle']:<12}  {dt:<{dwidth}}  {r['description']}")


@cli.command()
@click.argument("file", type=click.Path(dir_okay=False))
@format_option("table", "json")
@click.option("--strict", is_flag=True,
              help="Exit 1 on warnings too (default: only on errors; info notes never fail).")
@click.option("--explain-perfect-vs-blank", "explain", is_flag=True,
              help="Score all-blank and perfect predictions for FILE's shapes under each "
                   "convention instead of diagnosing.")
@click.option("--blank", type=Number(int), default=None,
              help="Blank index the loss uses  [default: FILE's 'blank', else 0]")
@click.option("--layout", type=OneOf(LAYOUTS), default=LAYOUTS[0], show_default=True,
              help="Layout the loss expects the values in (torch's ctc_loss: TNC).")
@click.option("--reduction", type=OneOf(REDUCTIONS), default="mean",
              show_default=True, help="Reduction the loss uses.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Also write a PNG of the first samples' frames (probabilities, blank, "
                   "greedy emissions).")
@click.option("--html", "html_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the findings, their evidence and fixes and the frames plot "
                   "as one HTML page.")
@click.option("--max-bytes", "max_bytes", type=Number(int, min=1), default=MAX_BYTES,
              show_default=True, help="Refuse FILE when its arrays claim more bytes than this "
              "in all (read from the headers, before loading).")
@click.option("--device", type=OneOf(TORCH_DEVICES), default=None,
              help="Also say which of torch's CTC paths FILE's batch takes there (on cuda: "
                   "cuDNN or native, by torch's rule; no GPU needed) and how to take the other.")
@click.option("--decoder", "decoder", metavar="PKG.MOD:NAME", default=None,
              help="Check this decode function on FILE's values (and input_lengths) against "
                   "ctcbench's decoding instead of diagnosing the loss's inputs.")
@click.option("--beam", type=Number(int, min=1), default=None,
              help="With --decoder: it is a beam search of this width (default: greedy).")
@click.option("--alphabet", default=None, metavar="CHARS",
              help="With --decoder: class k's character is CHARS[k], for a decoder that "
                   "returns strings.")
def doctor(file, fmt, strict, explain, blank, layout, reduction, plot_path, html_path,
           max_bytes, device, decoder, beam, alphabet):
    """Diagnose the CTC inputs saved in FILE (.npz or .pt) and say how to fix them."""
    from ctcbench.doctor.examine import examine
    from ctcbench.files import check_output_file
    if decoder is None:
        for option in [o for o, v in (("--beam", beam), ("--alphabet", alphabet)) if v]:
            raise click.UsageError(f"{option}: expected --decoder with it, got none")
    else:
        return _doctor_decoder(file, decoder, fmt, blank, layout, beam, alphabet, max_bytes,
                               others=(("--explain-perfect-vs-blank", explain),
                                       ("--device", device), ("--html", html_path),
                                       ("--plot", plot_path)))
    for option in [o for o, v in (("--html", html_path), ("--device", device)) if v and explain]:
        raise click.UsageError(f"{option}: expected a diagnosis, got --explain-perfect-vs-blank")
    for option, path, what, suffixes in (("--plot", plot_path, "a PNG", (".png",)),
                                         ("--html", html_path, "an HTML", (".html", ".htm"))):
        if path:
            check_output_file(path, option, what, suffixes)
    found = examine(file, blank=blank, layout=layout, reduction=reduction, explain=explain,
                    device=device, max_bytes=max_bytes)
    result, inputs = found.result, found.inputs
    click.echo(found.to_json() if fmt == "json" else found.format_table())
    if plot_path:
        from ctcbench.doctor.plot import plot_frames
        click.echo(f"plot: {plot_frames(plot_path, **inputs, layout=layout)}", err=True)
    if html_path:
        from ctcbench.drivers import write_doctor_report
        html = write_doctor_report(result, inputs, html_path, layout=layout, source=file)
        click.echo(f"report: {html}", err=True)
    if not explain and result.worst() in (("error", "warning") if strict else ("error",)):
        raise SystemExit(1)


def _doctor_decoder(file, decoder, fmt, blank, layout, beam, alphabet, max_bytes, others):
    """``doctor FILE --decoder``: the user's decoder checked; exit 1 on any finding."""
    from ctcbench.doctor.decoder import examine_decoder
    from ctcbench.files import to_json
    for option in [o for o, v in others if v]:
        raise click.UsageError(f"{option}: expected a diagnosis of the loss's inputs, "
                               f"got --decoder")
    found = examine_decoder(file, decoder, blank=blank, layout=layout, beam=beam,
                            alphabet=alphabet, max_bytes=max_bytes)
    click.echo(to_json(found.to_dict(), indent=2) if fmt == "json" else found.format_table())
    if not found.ok:
        raise SystemExit(1)


@cli.command(help=f"Write one self-contained HTML page for run folders of any kind "
                  f"({', '.join(DRIVERS)}), side by side.")
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...",
                type=click.Path(file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="HTML file to write [default: RUN_DIR/report.html for one folder].")
def report(run_dirs, out):
    from ctcbench.drivers import write_report
    click.echo(f"report: {write_report([Path(d) for d in run_dirs], out)}")


for driver in DRIVERS:  # each driver's commands live in ctcbench/<driver>/command.py
    for command in importlib.import_module(f"ctcbench.{driver}.command").COMMANDS:
        cli.add_command(command)

main = cli  # the console script's entry point (pyproject.toml)
