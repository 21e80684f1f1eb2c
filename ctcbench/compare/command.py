"""``ctcbench compare``: the command over ``ctcbench.compare.run.compare``."""
from __future__ import annotations

import click

from ctcbench.cli_options import (aligner_options, baseline_options, case_dirs_option,
                                  format_option, function_options, list_option, out_options)
from ctcbench.cli_types import OneOf
from ctcbench.compare.config import compare_settings
from ctcbench.core.problem import FLOAT_DTYPES
from ctcbench.drivers import finish_run
from ctcbench.settings import SettingsCommand, command_line_settings


@click.command("compare", cls=SettingsCommand, settings=compare_settings)  # made on first use
@list_option("--backend", "backends", metavar="NAME",
             help="Backends to check (repeatable); default every registered backend.")
@function_options("Check")
@list_option("--decoder", "decoders", metavar="NAME",
             help="Decoders and aligners to check on the decoder cases (repeatable, or 'all'), "
                  "or your own decoder function PKG.MOD:NAME, decode(log_probs (T,N,C), "
                  "lengths (N,), *, blank, beam) -> N lists of [labels, score], run in a "
                  "worker process; default ctcbench's own when no --backend or --function is "
                  "given.")
@aligner_options("Check")
@click.option("--case", "case_globs", multiple=True, metavar="GLOB",
              help="Case name or glob, also family/name (repeatable); default all.")
@click.option("--dtype", "dtypes", multiple=True,
              type=OneOf(FLOAT_DTYPES),
              help="Only these dtypes (repeatable); default each case's own list.")
@case_dirs_option("use")
@out_options("compare")
@baseline_options
@format_option("table", "json", "csv")
@click.pass_context
def compare_cmd(ctx, backends, decoders, aligners, score, functions, convention, device,
                known_issues, case_globs, dtypes, case_dirs, out, resume, save_baseline, baseline,
                fmt, **_settings):
    """Check every backend's loss and gradient on the case library; exit 1 on any failure."""
    from ctcbench.compare.run import compare
    from ctcbench.compare.table import df_records, format_table, nothing_checked, to_csv
    from ctcbench.files import to_json
    result = compare(backends or None, list(case_globs) or None, list(dtypes) or None,
                     case_dirs=case_dirs or None, out=out, resume=resume,
                     functions=functions, convention=convention, device=device,
                     known_issues=known_issues, save_baseline=save_baseline, decoders=decoders,
                     aligners=aligners, score=score,
                     baseline=baseline, **command_line_settings(ctx, compare_settings()))
    finish_run(result, named=fmt == "table")  # the table's last line names the folder
    summary = result.summary
    if fmt == "json":
        click.echo(to_json({"summary": summary, "rows": df_records(result.rows)}, indent=1))
    elif fmt == "csv":
        click.echo(to_csv(result.rows), nl=False)
    else:
        click.echo(format_table(result.rows, run_dir=result.run_dir, summary=summary))
    if nothing_checked(summary):  # a gate must not pass on nothing
        raise click.ClickException(nothing_checked(summary))
    if summary["failed"]:
        raise SystemExit(1)


COMMANDS = (compare_cmd,)
