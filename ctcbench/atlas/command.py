"""``ctcbench atlas``: the command over ``ctcbench.atlas.run.atlas``."""
from __future__ import annotations

import click

from ctcbench.cli_options import format_option, list_option, out_options
from ctcbench.cli_types import Path
from ctcbench.drivers import finish_run


@click.command()
@list_option("--backend", "backend_names", metavar="NAME",
             help="Only try the entries of these backends (repeatable); default every backend.")
@click.option("--versions", "versions", multiple=True, metavar="DIST=V1,V2",
              help="Also try the entries of a framework light enough to install beside the "
                   "stack (optax, keras) on each of these releases, oldest first; each is "
                   "installed once into --versions-cache (repeatable).")
@click.option("--versions-cache", type=Path(file_okay=False), default=None,
              help="Where --versions installs each release [default: "
                   "~/.cache/ctcbench/versions].")
@out_options("atlas")
@format_option("table", "json")
def atlas(backend_names, versions, versions_cache, out, resume, fmt):
    """Try each known CTC bug of the atlas on the installed stack: reproduces, fixed, or not."""
    from ctcbench.atlas.run import atlas as run_atlas, records, table_text
    from ctcbench.files import to_json
    result = finish_run(run_atlas(list(backend_names) or None, out=out, resume=resume,
                                  versions=versions, versions_cache=versions_cache),
                        named=fmt == "table")
    rows = records(result)
    if fmt == "json":
        click.echo(to_json({"summary": result.summary, "rows": rows}, indent=1))
        return
    click.echo(table_text(result))


COMMANDS = (atlas,)
