"""``ctcbench datasheet``: the command over ``ctcbench.datasheet.run.datasheet``."""
from __future__ import annotations

import click

from ctcbench.cli_options import format_option, function_options, list_option, out_options, with_functions
from ctcbench.datasheet.config import datasheet_settings
from ctcbench.drivers import finish_run
from ctcbench.settings import SettingsCommand, command_line_settings


@click.command(cls=SettingsCommand, settings=datasheet_settings)  # options made on first use
@list_option("--backend", "backend_names", metavar="NAME",
             help="Backends to describe (repeatable).")
@function_options("Describe", known_issues=False)
@click.option("--all", "all_backends", is_flag=True,
              help="Every registered backend, side by side (those that cannot run here are "
                   "listed as skipped).")
@list_option("--decoder", "decoders", metavar="NAME",
             help="Probe these decoders or aligners (repeatable, or 'all'), or your own "
                  "decoder function PKG.MOD:NAME as compare --decoder takes it, with malformed "
                  "and unusual input instead, each in a worker; prints the sheet, no run folder.")
@out_options("datasheet")
@format_option("table", "json")
@click.pass_context
def datasheet(ctx, backend_names, functions, convention, device, all_backends, decoders, out,
              resume, fmt, **_settings):
    """One page per CTC implementation: its limits, worst precision, bad input, speed."""
    if decoders:
        return _decoder_sheet(decoders, fmt, given=(("--backend", backend_names),
                                                    ("--function", functions),
                                                    ("--all", all_backends), ("--out", out)))
    from ctcbench.datasheet.run import datasheet as run_datasheet
    from ctcbench.datasheet.sheet import text
    from ctcbench.environment import cpu_text
    from ctcbench.drivers import write_part_pages
    from ctcbench.files import read_text
    backend_names = with_functions(backend_names, functions, convention, device) or []
    result = run_datasheet(backend_names, all_backends=all_backends, out=out, resume=resume,
                           **command_line_settings(ctx, datasheet_settings()))
    result.files += write_part_pages(result.run_dir)  # before report.html, which links them
    finish_run(result)
    if fmt == "json":
        click.echo(read_text(result.run_dir / "datasheet.json", "datasheet.json"), nl=False)
        return
    click.echo(text(result.summary["sheets"]))
    click.echo(f"Measured on {cpu_text(result.environment)}")



def _decoder_sheet(decoders, fmt, given) -> None:
    from ctcbench.runtime.decoders import expand_decoder_names as expand
    from ctcbench.datasheet.decoders import probe_decoder, sheet_text
    from ctcbench.files import to_json
    from ctcbench.runtime.decoders import check_decoder_names
    from ctcbench.runtime.protocol import BackendUnavailable
    for option in [o for o, v in given if v]:
        raise click.UsageError(f"--decoder: expected it without {option}, got {option} too")
    from ctcbench.runtime.decoder_functions import add_decoder_functions
    names = expand(add_decoder_functions(decoders, say=lambda line: click.echo(line, err=True)))
    check_decoder_names(names, "--decoder")
    from ctcbench.progress import Progress
    rows, skipped = [], []
    with Progress("datasheet decoders", total=len(names), unit="decoders") as bar:
        for name in names:
            bar.note(name)
            try:
                rows += probe_decoder(name)
            except BackendUnavailable as exc:
                skipped.append(f"skipped {name}: {exc}")
            bar.update()
    if fmt == "json":
        click.echo(to_json({"rows": rows, "skipped": skipped}, indent=1))
        return
    click.echo("\n".join(([sheet_text(rows)] if rows else []) + skipped))


COMMANDS = (datasheet,)
