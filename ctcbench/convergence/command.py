"""``ctcbench convergence`` and ``ctcbench predict``: the commands over
``ctcbench.convergence.run`` and ``ctcbench.convergence.predict``."""
from __future__ import annotations

import click

from ctcbench.cli_options import format_option, out_options
from ctcbench.cli_types import Number, OneOf, Path
from ctcbench.cluster import EXECUTORS
from ctcbench.convergence.datacache import DEFAULT_CACHE_DIR
from ctcbench.convergence.options import config_option, run_settings
from ctcbench.convergence.scenarios import SCENARIOS
from ctcbench.drivers import finish_run
from ctcbench.settings import SettingsCommand, command_line_settings


@click.command(cls=SettingsCommand, settings=run_settings, extra=config_option)  # made on first use
@click.option("--jobs", type=Number(int), default=None, help="Parallel runs [default: min(2, CPUs)].")
@out_options("convergence", resume_note=" (its stored config is used)")
@click.option("--cache-dir", type=Path(file_okay=False), default=str(DEFAULT_CACHE_DIR),
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


@click.command()
@click.option("--checkpoint", required=True, type=Path(dir_okay=False),
              help="checkpoint.pt written by `ctcbench convergence`.")
@click.argument("images", nargs=-1, required=True, type=Path(dir_okay=False))
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


COMMANDS = (convergence, predict)
