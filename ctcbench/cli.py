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
    from ctcbench.bench import bench as run_bench, format_table
    from ctcbench.results import to_json
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


def main():
    cli()
