"""The ``ctcbench`` command line: thin commands over library functions.

Library errors become one ``Error:`` line here and nowhere else (``Commands``). Heavy imports
happen inside commands, so ``ctcbench --help`` stays instant.
"""
from __future__ import annotations

import dataclasses
from pathlib import Path

import click

from ctcbench import __version__
from ctcbench.cli_options import (baseline_options, case_dirs_option, format_option,
                                  function_options, list_option, one_backend, out_options,
                                  with_functions)
from ctcbench.cli_types import Number, OneOf
from ctcbench.bench.config import bench_settings
from ctcbench.cluster import EXECUTORS
from ctcbench.convergence.datacache import DEFAULT_CACHE_DIR
from ctcbench.convergence.options import config_option, run_settings
from ctcbench.convergence.scenarios import SCENARIOS
from ctcbench.core.problem import FLOAT_DTYPES
from ctcbench.core.reduction import REDUCTIONS
from ctcbench.datasheet.config import datasheet_settings
from ctcbench.fuzz.config import fuzz_settings
from ctcbench.doctor.inputs import LAYOUTS
from ctcbench.doctor.load import MAX_BYTES
from ctcbench.doctor.torch_path import DEVICES as TORCH_DEVICES
from ctcbench.drivers import DRIVERS, finish_run
from ctcbench.errors import InputError
from ctcbench.settings import SettingsCommand, command_line_settings


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


@cli.command("compare")
@list_option("--backend", "backends", metavar="NAME",
             help="Backends to check (repeatable); default every registered backend.")
@function_options("Check")
@click.option("--case", "case_globs", multiple=True, metavar="GLOB",
              help="Case name or glob, also family/name (repeatable); default all.")
@click.option("--dtype", "dtypes", multiple=True,
              type=OneOf(FLOAT_DTYPES),
              help="Only these dtypes (repeatable); default each case's own list.")
@case_dirs_option("use")
@out_options("compare")
@click.option("--plot/--no-plot", default=True, show_default=True,
              help="Save margins.png (error / tolerance per case and backend) in the run folder.")
@baseline_options
@format_option("table", "json", "csv")
def compare_cmd(backends, functions, convention, device, known_issues, case_globs, dtypes,
                case_dirs, out, resume, plot, save_baseline, baseline, max_change, fmt):
    """Check every backend's loss and gradient on the case library; exit 1 on any failure."""
    from ctcbench.compare.run import compare
    from ctcbench.compare.table import df_records, format_table, nothing_checked, to_csv
    from ctcbench.files import to_json
    result = compare(backends or None, list(case_globs) or None, list(dtypes) or None,
                     case_dirs=case_dirs or None, out=out, resume=resume, plot=plot,
                     functions=functions, convention=convention, device=device,
                     known_issues=known_issues, save_baseline=save_baseline,
                     baseline=baseline, max_change=max_change)
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
def doctor(file, fmt, strict, explain, blank, layout, reduction, plot_path, html_path,
           max_bytes, device):
    """Diagnose the CTC inputs saved in FILE (.npz or .pt) and say how to fix them."""
    from ctcbench.doctor.examine import examine
    from ctcbench.files import check_output_file
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


@cli.command(cls=SettingsCommand, settings=bench_settings)  # options made on first use
@list_option("--backend", "backend_names", metavar="NAME",
             help="Backends to time (repeatable); default every registered one. "
                  "torch is always timed too, as the reference for ratios.")
@function_options("Time", known_issues=False)
@format_option("table", "json", "csv")
@out_options("bench")
@click.option("--baseline", type=click.Path(exists=True), default=None,
              help="A saved bench run (folder, rows.jsonl, bench.json or bench.csv).")
@click.option("--fail-on", "fail_on", multiple=True, metavar="METRIC:PCT",
              help="Exit non-zero when METRIC (time, ratio, memory) grew more than PCT "
                   "over the baseline, e.g. time:20%.")
@click.pass_context
def bench(ctx, backend_names, functions, convention, device, fmt, out, resume, baseline,
          fail_on, **_settings):
    """Time forward+backward and peak memory of every backend over a size grid."""
    from ctcbench.bench.run import bench as run_bench, format_table, records
    from ctcbench.files import to_json
    backend_names = with_functions(backend_names, functions, convention, device)
    result = run_bench(backends=backend_names, out=out, resume=resume, baseline=baseline,
                       fail_on=fail_on, **command_line_settings(ctx, bench_settings()))
    finish_run(result)
    rows = records(result.rows)
    if fmt == "json":
        click.echo(to_json(rows, indent=2))
    elif fmt == "csv":
        click.echo((result.run_dir / "bench.csv").read_text(), nl=False)
    else:
        click.echo(format_table(rows))
    if result.summary["regressions"]:
        raise click.ClickException("\n".join(result.summary["regressions"]))


@cli.command(cls=SettingsCommand, settings=run_settings, extra=config_option)  # made on first use
@click.option("--jobs", type=Number(int), default=None, help="Parallel runs [default: min(2, CPUs)].")
@out_options("convergence", resume_note=" (its stored config is used)")
@click.option("--cache-dir", type=click.Path(file_okay=False), default=str(DEFAULT_CACHE_DIR),
              show_default=True, help="Where rendered data pools are cached.")
@click.option("--executor", type=OneOf(EXECUTORS), default="local",
              show_default=True, help="Where runs execute: local worker processes, or a Dask "
              "LocalCluster of --jobs workers (needs ctcbench[dask]).")
@click.option("--scheduler", default=None, metavar="tcp://HOST:PORT",
              help="Submit each run as a task to this running Dask scheduler; its workers must "
                   "share the run folder's filesystem.")
@click.option("--tensorboard", "tensorboard", is_flag=False, flag_value="", default=None,
              type=click.Path(file_okay=False), metavar="[DIR]",
              help="Also write TensorBoard event files (scalars and hparams), one subfolder "
                   "per run, into DIR [default: RUN_FOLDER/tensorboard]. Needs "
                   "pip install 'ctcbench[tensorboard]'.")
@click.option("--scenario", type=OneOf(list(SCENARIOS)), default=None,
              help="Run a named experiment (docs/convergence.md): one grid per arm, in "
                   "--out/<arm>/; options given here override the scenario's shared settings, "
                   "not what an arm changes.")
@format_option("table", "json")
@click.pass_context
def convergence(ctx, jobs, out, resume, cache_dir, executor, scheduler, tensorboard, scenario,
                fmt, config_file, **_settings):
    """Train small line recognisers with CTC under several optimizers and record convergence.

    Every setting can also come from --config FILE.toml, for example:

    \b
        optimizer = ["adam", "rmsprop"]   # grid settings take a list
        lr = 3e-3
        seed = [0, 1, 2]
        steps = 300
        [model]
        name = "crnn"
        batchnorm = true
        [data]
        max_len = 6
        seed = 0                          # --data-seed
    """
    from ctcbench.convergence.run import convergence as run_convergence
    from ctcbench.convergence.tables import grid_output, scenario_output
    result = run_convergence(
        command_line_settings(ctx, run_settings()), scenario=scenario, out=out, resume=resume,
        jobs=jobs, cache_dir=cache_dir, executor=executor, scheduler=scheduler,
        tensorboard=tensorboard, config_file=config_file,
        echo=lambda line: click.echo(line, err=True))
    for run in result.arms.values() if scenario else [result]:
        finish_run(run, named=fmt == "table")  # report.html in each grid's folder
    click.echo(scenario_output(result, fmt) if scenario else grid_output(result, fmt))


@cli.command(help=f"Write one self-contained HTML page for run folders of any kind "
                  f"({', '.join(DRIVERS)}), side by side.")
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...",
                type=click.Path(file_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="HTML file to write [default: RUN_DIR/report.html for one folder].")
def report(run_dirs, out):
    from ctcbench.drivers import write_report
    click.echo(f"report: {write_report([Path(d) for d in run_dirs], out)}")


@cli.command()
@click.option("--checkpoint", required=True, type=click.Path(dir_okay=False),
              help="checkpoint.pt written by `ctcbench convergence`.")
@click.argument("images", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--beam", type=Number(int), default=0, show_default=True,
              help="Prefix beam search width (0 = greedy).")
@format_option("table", "json")
def predict(checkpoint, images, beam, fmt):
    """Read line images with a trained checkpoint and print the decoded text."""
    from ctcbench.convergence.predict import predict_images
    from ctcbench.files import to_json
    rows = predict_images(checkpoint, images, beam=beam)
    if fmt == "json":
        click.echo(to_json(rows, indent=2))
    else:
        for r in rows:
            click.echo(f"{r['image']}\t{r['text']}" if r["error"] is None
                       else f"{r['image']}\tError: {r['error']}")
    failed = [r["image"] for r in rows if r["error"] is not None]
    if failed:  # every image was tried; the run still fails
        raise click.ClickException(f"images: expected readable images, got {len(failed)} "
                                   f"unreadable: {', '.join(failed)}")


@cli.command(cls=SettingsCommand, settings=fuzz_settings)  # options made on first use
@click.option("--backend", "backend_name", default=None, metavar="NAME",
              help="Backend to fuzz (or --function).")
@function_options("Fuzz", known_issues=False)
@out_options("fuzz", resume_note=" (its stored failures are replayed first)")
@format_option("table", "json")
@click.pass_context
def fuzz(ctx, backend_name, functions, convention, device, out, resume, fmt, **_settings):
    """Search for the smallest problem on which a backend is wrong; exit 1 when one is found."""
    from ctcbench.fuzz.run import fuzz as run_fuzz, summary_text
    from ctcbench.files import to_json
    backend_name, named = one_backend(backend_name, functions, convention, device)
    result = run_fuzz(backend_name, out=out, resume=resume,
                      **command_line_settings(ctx, fuzz_settings()))
    finish_run(result)
    found = result.summary
    if fmt == "json":
        click.echo(to_json({**found, "run_dir": str(result.run_dir)}, indent=2))
    else:
        click.echo(summary_text(found, backend_name, ctx.params["against"], named))
    if found["found"]:
        raise SystemExit(1)


@cli.command()
@list_option("--backend", "backend_names", metavar="NAME",
             help="Only try the entries of these backends (repeatable); default every backend.")
@out_options("atlas")
@format_option("table", "json")
def atlas(backend_names, out, resume, fmt):
    """Try each known CTC bug of the atlas on the installed stack: reproduces, fixed, or not."""
    from ctcbench.atlas.run import atlas as run_atlas, table_text
    from ctcbench.files import to_json
    result = finish_run(run_atlas(list(backend_names) or None, out=out, resume=resume),
                        named=fmt == "table")
    rows = result.rows.to_dict("records")
    if fmt == "json":
        click.echo(to_json({"summary": result.summary, "rows": rows}, indent=1))
        return
    click.echo(table_text(result))


@cli.command(cls=SettingsCommand, settings=datasheet_settings)  # options made on first use
@list_option("--backend", "backend_names", metavar="NAME",
             help="Backends to describe (repeatable).")
@function_options("Describe", known_issues=False)
@click.option("--all", "all_backends", is_flag=True,
              help="Every registered backend, side by side (those that cannot run here are "
                   "listed as skipped).")
@out_options("datasheet")
@format_option("table", "json")
@click.pass_context
def datasheet(ctx, backend_names, functions, convention, device, all_backends, out, resume, fmt,
              **_settings):
    """One page per CTC implementation: its limits, worst precision, bad input, speed."""
    from ctcbench.datasheet.run import datasheet as run_datasheet
    from ctcbench.datasheet.sheet import text
    from ctcbench.drivers import write_backend_pages
    from ctcbench.files import read_text
    backend_names = with_functions(backend_names, functions, convention, device) or []
    result = run_datasheet(backend_names, all_backends=all_backends, out=out, resume=resume,
                           **command_line_settings(ctx, datasheet_settings()))
    result.files += write_backend_pages(result.run_dir)  # before report.html, which links them
    finish_run(result)
    if fmt == "json":
        click.echo(read_text(result.run_dir / "datasheet.json", "datasheet.json"), nl=False)
        return
    click.echo(text(result.summary["sheets"]))


main = cli  # the console script's entry point (pyproject.toml)
