"""``ctcbench atlas``: the command over ``ctcbench.atlas.run.atlas``."""
from __future__ import annotations

import click

from ctcbench.cli_options import format_option, list_option, out_options
from ctcbench.drivers import finish_run


@click.command()
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


COMMANDS = (atlas,)
