"""The ``ctcbench`` command line: thin commands over library functions.

Library errors become ``click.ClickException`` here and nowhere else. Heavy imports
happen inside commands, so ``ctcbench --help`` stays instant.
"""
from __future__ import annotations

import dataclasses
import functools
import os
from pathlib import Path

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
    from ctcbench.runstore import to_json
    infos = list_backends()
    if fmt == "json":
        click.echo(to_json([dataclasses.asdict(i) for i in infos], indent=2))
        return
    width = max(len(i.name) for i in infos)
    for i in infos:
        status = "available" if i.available else "unavailable"
        why = "" if i.available else f"  {i.reason}" + (f" -> {i.hint}" if i.hint else "")
        click.echo(f"{i.name:<{width}}  {status:<11}  {i.source:<7}{why}")


@cli.command("cases")
@click.option("--cases", "case_dirs", multiple=True, metavar="DIR",
              type=click.Path(file_okay=False),
              help="Folder of .toml/.json case files to list instead of the built-in library.")
@format_option("table", "json")
@library_errors
def cases_cmd(case_dirs, fmt):
    """List the edge cases: family, oracle, dtypes and what each one checks."""
    from ctcbench.caselib.library import describe, load_cases
    from ctcbench.runstore import to_json
    rows = describe(load_cases(case_dirs or None))
    if fmt == "json":
        click.echo(to_json(rows, indent=1))
        return
    names = [f"{r['family']}/{r['name']}" for r in rows]
    width = max(len(n) for n in names)
    for name, r in zip(names, rows):
        click.echo(f"{name:<{width}}  {r['oracle']:<12}  {r['description']}")


@cli.command("compare")
@click.option("--backend", "backends", multiple=True, metavar="NAME",
              help="Backend to check (repeatable); default every registered backend.")
@click.option("--case", "case_globs", multiple=True, metavar="GLOB",
              help="Case name or glob, also family/name (repeatable); default all.")
@click.option("--dtype", "dtypes", multiple=True,
              type=click.Choice(["float16", "bfloat16", "float32", "float64"]),
              help="Only these dtypes (repeatable); default each case's own list.")
@click.option("--cases", "case_dirs", multiple=True, metavar="DIR",
              type=click.Path(file_okay=False),
              help="Folder of .toml/.json case files to use instead of the built-in library.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run folder; default reports/compare-<UTC time>.")
@click.option("--resume", is_flag=True, help="Keep the rows already in --out; run the rest.")
@click.option("--plot/--no-plot", default=True, show_default=True,
              help="Save margins.png (error / tolerance per case and backend) in the run folder.")
@format_option("table", "json", "csv")
@library_errors
def compare_cmd(backends, case_globs, dtypes, case_dirs, out, resume, plot, fmt):
    """Check every backend's loss and gradient on the case library; exit 1 on any failure."""
    from ctcbench.compare.run import (compare, df_records, format_table, nothing_checked, summarize,
                                  to_csv)
    from ctcbench.runstore import to_json
    if resume and out is None:
        raise click.UsageError("--resume needs --out (the run folder to continue)")
    df = compare(backends or None, list(case_globs) or None, list(dtypes) or None,
                 case_dirs=case_dirs or None, out=out, resume=resume, plot=plot)
    summary = summarize(df)
    if fmt == "json":
        click.echo(to_json({"summary": summary, "rows": df_records(df)}, indent=1))
    elif fmt == "csv":
        click.echo(to_csv(df), nl=False)
    else:
        click.echo(format_table(df))
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
@click.option("--blank", type=int, default=None,
              help="Blank index the loss uses  [default: FILE's 'blank', else 0]")
@click.option("--layout", type=click.Choice(["TNC", "NTC"]), default="TNC", show_default=True,
              help="Layout the loss expects the values in (torch's ctc_loss: TNC).")
@click.option("--reduction", type=click.Choice(["mean", "sum", "none"]), default="mean",
              show_default=True, help="Reduction the loss uses.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              help="Also write a PNG of the first samples' frames (probabilities, blank, "
                   "greedy emissions).")
@library_errors
def doctor(file, fmt, strict, explain, blank, layout, reduction, plot_path):
    """Diagnose the CTC inputs saved in FILE (.npz or .pt) and say how to fix them."""
    from ctcbench.doctor.diagnose import diagnose
    from ctcbench.doctor.explain import explain_perfect_vs_blank
    from ctcbench.doctor.load import load_inputs
    from ctcbench.runstore import to_json
    if plot_path:  # before any work, so a bad path cannot fail a clean diagnosis at the end
        folder = Path(plot_path).parent
        if not folder.is_dir() or not os.access(folder, os.W_OK):
            raise click.ClickException(f"--plot: expected a PNG path in an existing, writable "
                                   f"folder, got {plot_path!r} ({folder} "
                                   f"{'is not writable' if folder.is_dir() else 'does not exist'})")
    inputs = load_inputs(file)
    if blank is not None:
        inputs["blank"] = blank
    if explain:
        result = explain_perfect_vs_blank(**inputs, layout=layout)
    else:
        result = diagnose(**inputs, layout=layout, reduction=reduction)
    click.echo(to_json(result.to_dict(), indent=2) if fmt == "json" else result.format_table())
    if plot_path:
        from ctcbench.doctor.plot import plot_frames
        click.echo(f"plot: {plot_frames(plot_path, **inputs, layout=layout)}", err=True)
    if not explain and result.worst() in (("error", "warning") if strict else ("error",)):
        raise SystemExit(1)


@cli.command()
@click.option("--backend", "backend_names", multiple=True, metavar="NAME",
              help="Backend to time (repeatable); default every registered one. "
                   "torch is always timed too, as the reference for ratios.")
@click.option("--grid", default="default", show_default=True,
              metavar="small|default|targets|large|FILE",
              help="Named size grid, or a JSON/CSV file of T,N,C,L rows.")
@click.option("--repeat", type=click.IntRange(min=1), default=5, show_default=True,
              help="Timed measurements per backend and size (after one warm-up call).")
@click.option("--threads", type=click.IntRange(min=1), default=1, show_default=True,
              help="Threads for torch and NumPy's BLAS.")
@click.option("--dtype", type=click.Choice(["float64", "float32"]), default="float64",
              show_default=True, help="Logits dtype handed to every backend.")
@format_option("table", "json", "csv")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run folder (default reports/bench-<UTC time>); an existing one resumes.")
@click.option("--baseline", type=click.Path(exists=True), default=None,
              help="A saved bench run (folder, rows.jsonl, bench.json or bench.csv).")
@click.option("--fail-on", "fail_on", multiple=True, metavar="METRIC:PCT",
              help="Exit non-zero when METRIC (time, ratio, memory) grew more than PCT "
                   "over the baseline, e.g. time:20%.")
@library_errors
def bench(backend_names, grid, repeat, threads, dtype, fmt, out, baseline, fail_on):
    """Time forward+backward and peak memory of every backend over a size grid."""
    from ctcbench.bench.run import bench as run_bench, format_table
    from ctcbench.runstore import to_json
    report = run_bench(backends=backend_names, grid=grid, repeat=repeat, threads=threads,
                       dtype=dtype, out=out, baseline=baseline, fail_on=fail_on)
    if fmt == "json":
        click.echo(to_json(report.rows, indent=2))
    elif fmt == "csv":
        click.echo((report.run_dir / "bench.csv").read_text(), nl=False)
    else:
        click.echo(format_table(report.rows))
    click.echo(f"results and plots in {report.run_dir}"
               + (f" ({report.resumed} sizes resumed)" if report.resumed else ""), err=True)
    if report.regressions:
        raise click.ClickException("\n".join(report.regressions))


def _csv_list(kind):
    """A click callback parsing ``a,b,c`` into a tuple of ``kind``, naming the option on error."""
    def parse(ctx, param, value):
        try:
            items = tuple(kind(v.strip()) for v in str(value).split(",") if v.strip())
        except ValueError:
            raise click.BadParameter(f"expected a comma-separated list of {kind.__name__}, "
                                     f"got {value!r}") from None
        if not items:
            raise click.BadParameter(f"expected at least one value, got {value!r}")
        if len(set(items)) < len(items):  # two runs would share one run folder
            raise click.BadParameter(f"expected distinct values, got {value!r}")
        return items
    return parse


@cli.command()
@click.option("--optimizer", default="rmsprop", show_default=True, callback=_csv_list(str),
              help="adam|rmsprop|sgd|adamw|adadelta; a comma list runs each.")
@click.option("--lr", default="1e-3", show_default=True, callback=_csv_list(float),
              help="Learning rate(s), comma list.")
@click.option("--seed", default="0", show_default=True, callback=_csv_list(int),
              help="Seed(s) for init and batch order, comma list.")
@click.option("--model", default="crnn", show_default=True, callback=_csv_list(str),
              help="linecnn|linecnnlstm|crnn|rescrnn|perpos; comma list.")
@click.option("--batchnorm/--no-batchnorm", default=False, show_default=True,
              help="BatchNorm in the conv blocks (crnn, linecnn*, perpos).")
@click.option("--channels", type=int, default=16, show_default=True,
              help="Width of the first conv block (32 = the ~640k-parameter CRNN).")
@click.option("--hidden", type=int, default=128, show_default=True, help="LSTM size per direction.")
@click.option("--beta1", type=float, default=0.9, show_default=True, help="Adam/AdamW beta1.")
@click.option("--beta2", type=float, default=0.999, show_default=True, help="Adam/AdamW beta2.")
@click.option("--alpha", type=float, default=0.99, show_default=True, help="RMSprop smoothing.")
@click.option("--momentum", type=float, default=0.0, show_default=True, help="RMSprop/SGD momentum.")
@click.option("--weight-decay", type=float, default=0.0, show_default=True)
@click.option("--clip", type=float, default=0.0, show_default=True, help="Max gradient norm (0 = off).")
@click.option("--warmup", type=int, default=0, show_default=True, help="Linear lr warm-up steps.")
@click.option("--reduction", type=click.Choice(["mean", "sum"]), default="mean", show_default=True)
@click.option("--ctc-backend", default="torch", show_default=True,
              help="Registry backend for the loss (numpy = float64 reference, slow).")
@click.option("--data", "data_kind", type=click.Choice(["lines", "captcha", "digits"]),
              default="lines", show_default=True, help="Synthetic font lines, captchas, or load_digits lines.")
@click.option("--charset", default="0123456789", show_default=True)
@click.option("--min-len", type=int, default=4, show_default=True)
@click.option("--max-len", type=int, default=8, show_default=True)
@click.option("--train-size", type=int, default=8000, show_default=True)
@click.option("--test-size", type=int, default=512, show_default=True)
@click.option("--data-seed", type=int, default=0, show_default=True)
@click.option("--steps", type=int, default=600, show_default=True)
@click.option("--batch-size", type=int, default=32, show_default=True)
@click.option("--eval-every", type=int, default=25, show_default=True)
@click.option("--beam", type=int, default=0, show_default=True,
              help="Also score the final model with prefix beam search of this width.")
@click.option("--threads", type=int, default=1, show_default=True, help="Torch threads per run.")
@click.option("--jobs", type=int, default=None, help="Parallel runs [default: min(2, CPUs)].")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run folder [default: reports/convergence-<UTC time>].")
@click.option("--resume", "resume", type=click.Path(file_okay=False, exists=True), default=None,
              help="Continue an interrupted run folder (its stored config is used).")
@click.option("--cache-dir", type=click.Path(file_okay=False), default="reports/.data-cache",
              show_default=True, help="Where rendered data pools are cached.")
@format_option("table", "json")
@library_errors
def convergence(optimizer, lr, seed, model, batchnorm, channels, hidden, beta1, beta2, alpha, momentum, weight_decay,
                clip, warmup, reduction, ctc_backend, data_kind, charset, min_len, max_len,
                train_size, test_size, data_seed, steps, batch_size, eval_every, beam, threads,
                jobs, out, resume, cache_dir, fmt):
    """Train small line recognisers with CTC under several optimizers and record convergence."""
    from ctcbench.convergence.data import DataConfig
    from ctcbench.convergence.grid import Grid, optimizer_table, run_grid
    from ctcbench.convergence.models import ModelConfig
    from ctcbench.convergence.train import TrainConfig
    from ctcbench.registry import BackendUnavailable
    from ctcbench.runstore import to_json
    base = TrainConfig(beta1=beta1, beta2=beta2, alpha=alpha, momentum=momentum,
                       weight_decay=weight_decay, clip=clip, warmup=warmup, steps=steps,
                       batch_size=batch_size, eval_every=eval_every, reduction=reduction,
                       ctc_backend=ctc_backend, threads=threads, beam=beam,
                       model=ModelConfig(batchnorm=batchnorm, channels=channels, hidden=hidden),
                       data=DataConfig(kind=data_kind, charset=charset, min_len=min_len,
                                       max_len=max_len, train_size=train_size,
                                       test_size=test_size, seed=data_seed))
    grid = Grid(optimizers=optimizer, lrs=lr, seeds=seed, models=model)
    try:
        run_dir, summary = run_grid(base, grid, out=resume or out, resume=resume is not None,
                                    jobs=jobs, cache_dir=cache_dir)
    except BackendUnavailable as exc:
        raise click.ClickException(f"ctc-backend: {exc}") from None
    if fmt == "json":
        click.echo(to_json(summary.to_dict("records"), indent=2))
        return
    cols = ["run", "final_cer", "final_seq_acc", "plateau_end_step", "steps_to_cer10",
            "steps_to_cer02", "cpu_s", "wall_s"]
    floats = {"float_format": lambda v: f"{v:.4g}"}
    click.echo(summary[cols].to_string(index=False, **floats))
    click.echo("")
    click.echo(optimizer_table(summary).to_string(index=False, **floats))
    click.echo(f"\nrun folder: {run_dir}  (plot: {run_dir / 'convergence.png'})")


@cli.command()
@click.option("--checkpoint", required=True, type=click.Path(dir_okay=False),
              help="checkpoint.pt written by `ctcbench convergence`.")
@click.argument("images", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--beam", type=int, default=0, show_default=True,
              help="Prefix beam search width (0 = greedy).")
@format_option("table", "json")
@library_errors
def predict(checkpoint, images, beam, fmt):
    """Read line images with a trained checkpoint and print the decoded text."""
    from ctcbench.convergence.predict import predict_images
    from ctcbench.runstore import to_json
    rows = predict_images(checkpoint, images, beam=beam)
    if fmt == "json":
        click.echo(to_json(rows, indent=2))
        return
    for r in rows:
        click.echo(f"{r['image']}\t{r['text']}")


@cli.command()
@click.option("--backend", "backend_name", required=True, metavar="NAME", help="Backend to fuzz.")
@click.option("--against", default="numpy", show_default=True, metavar="NAME",
              help="Backend taken as right (the float64 reference by default).")
@click.option("--budget", type=click.FloatRange(min=0, min_open=True), default=60.0,
              show_default=True, help="Seconds of search (shrinking a find comes on top).")
@click.option("--seed", type=click.IntRange(min=0), default=0, show_default=True,
              help="Seed of the search; the same seed draws the same problems.")
@click.option("--out", type=click.Path(file_okay=False), default=None,
              help="Run folder [default: reports/fuzz-<UTC time>]; a rerun replays its failures first.")
@format_option("table", "json")
@library_errors
def fuzz(backend_name, against, budget, seed, out, fmt):
    """Search for the smallest problem on which a backend is wrong; exit 1 when one is found."""
    from ctcbench.fuzz.run import fuzz as run_fuzz
    from ctcbench.runstore import to_json
    result = run_fuzz(backend_name, against=against, budget=budget, seed=seed, out=out)
    if fmt == "json":
        click.echo(to_json(result.to_dict(), indent=2))
    else:
        click.echo(f"fuzz {backend_name} against {against}: {result.tried} problems in "
                   f"{result.seconds:.0f} s")
        f = result.finding
        if f is None:
            click.echo("nothing found")
        else:
            click.echo(f"FOUND: {f.what}")
            click.echo(f"smallest problem: T={f.size['T']} N={f.size['N']} C={f.size['C']} "
                       f"L={f.size['L']} input_lengths={f.size['input_lengths']} "
                       f"blank={f.size['blank']} {f.dtype}")
            click.echo(f"case file: {f.case_file}")
            click.echo(f"reproduce: ctcbench compare --cases {f.case_file.parent} "
                       f"--backend {backend_name}")
    if result.finding is not None:
        raise SystemExit(1)


def main():
    cli()
