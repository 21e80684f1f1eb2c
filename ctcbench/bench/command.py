"""``ctcbench bench``: the command over ``ctcbench.bench.run.bench``."""
from __future__ import annotations

import click

from ctcbench.bench.config import bench_settings
from ctcbench.cli_options import format_option, function_options, list_option, out_options, with_functions
from ctcbench.cli_types import Path
from ctcbench.drivers import finish_run
from ctcbench.settings import SettingsCommand, command_line_settings


@click.command(cls=SettingsCommand, settings=bench_settings)  # options made on first use
@list_option("--backend", "backend_names", metavar="NAME",
             help="Backends to time (repeatable); default every registered one. "
                  "torch is always timed too, as the reference for ratios.")
@function_options("Time", known_issues=False)
@list_option("--decoder", "decoders", metavar="NAME",
             help="Time these decoders instead (repeatable), per frame and against ctcbench's "
                  "greedy, at each --beam; a name, or your own decoder function PKG.MOD:NAME "
                  "as compare --decoder takes it.")
@click.option("--beam", "beams", default="1,4,16", show_default=True, metavar="K[,K...]",
              callback=lambda ctx, param, value: _beams(value),
              help="With --decoder: the beam widths to time.")
@format_option("table", "json", "csv")
@out_options("bench")
@click.option("--baseline", type=Path(exists=True), default=None,
              help="A saved bench run (folder, rows.jsonl, bench.json or bench.csv).")
@click.option("--fail-on", "fail_on", multiple=True, metavar="METRIC:PCT",
              help="Exit non-zero when METRIC (time, ratio, memory) grew more than PCT "
                   "over the baseline, e.g. time:20%.")
@click.pass_context
def bench(ctx, backend_names, functions, convention, device, decoders, beams, fmt, out, resume,
          baseline, fail_on, **_settings):
    """Time forward+backward and peak memory of every backend over a size grid."""
    from ctcbench.bench.run import bench as run_bench, format_table, records
    from ctcbench.environment import cpu_text
    from ctcbench.files import to_json
    given = [o for o, v in (("--backend", backend_names), ("--function", functions),
                            ("--baseline", baseline)) if v]
    if decoders and given:
        raise click.UsageError(f"--decoder: expected it without --backend, --function and "
                               f"--baseline, got {' and '.join(given)} too")
    backend_names = with_functions(backend_names, functions, convention, device)
    if decoders:  # each PKG.MOD:NAME registered as a decoder, as compare does
        from ctcbench.runtime.decoder_functions import add_decoder_functions
        decoders = add_decoder_functions(decoders, say=lambda line: click.echo(line, err=True))
    result = run_bench(backends=backend_names, out=out, resume=resume, baseline=baseline,
                       fail_on=fail_on, decoders=decoders, beams=beams,
                       **command_line_settings(ctx, bench_settings()))
    finish_run(result)
    rows = records(result.rows)
    if decoders and fmt == "table":
        from ctcbench.bench.decoders import format_rows
        click.echo(format_rows(rows))
    elif fmt == "json":
        click.echo(to_json(rows, indent=2))
    elif fmt == "csv":
        click.echo((result.run_dir / "bench.csv").read_text(), nl=False)
    else:
        click.echo(format_table(rows))
    if fmt == "table":  # below the table; json and csv: the CPU is in the run's meta.json
        click.echo(f"Measured on {cpu_text(result.environment)}")
        between = ctx.params.get("between_calls") or "nothing"
        if between != "nothing":  # back to back, the default, goes without saying
            click.echo(f"Between two timed calls, untimed: {between} (--between-calls)")
    if decoders and result.summary["failed"]:  # a decoder raised: its rows say why
        raise SystemExit(1)
    if result.summary["regressions"]:
        raise click.ClickException("\n".join(result.summary["regressions"]))


def _beams(value: str) -> tuple[int, ...]:
    try:
        beams = tuple(int(v) for v in value.split(","))
    except ValueError:
        raise click.BadParameter(f"expected positive integers such as 1,4,16, got {value!r}",
                                 param_hint="--beam") from None
    if not all(b >= 1 for b in beams):
        raise click.BadParameter(f"expected positive integers such as 1,4,16, got {value!r}",
                                 param_hint="--beam")
    return beams


COMMANDS = (bench,)
