"""``ctcbench fuzz``: the command over ``ctcbench.fuzz.run.fuzz``."""
from __future__ import annotations

import click

from ctcbench.cli_options import format_option, function_options, one_backend, out_options
from ctcbench.drivers import finish_run
from ctcbench.fuzz.config import fuzz_settings
from ctcbench.settings import SettingsCommand, command_line_settings


@click.command(cls=SettingsCommand, settings=fuzz_settings)  # options made on first use
@click.option("--backend", "backend_name", default=None, metavar="NAME",
              help="Backend to fuzz (or --function).")
@click.option("--decoder", default=None, metavar="NAME",
              help="Decoder or aligner to fuzz instead, judged by brute force.")
@function_options("Fuzz", known_issues=False)
@out_options("fuzz", resume_note=" (its stored failures are replayed first)")
@format_option("table", "json")
@click.pass_context
def fuzz(ctx, backend_name, decoder, functions, convention, device, out, resume, fmt,
         **_settings):
    """Search for the smallest problem on which a backend is wrong; exit 1 when one is found."""
    from ctcbench.fuzz.run import fuzz as run_fuzz, summary_text
    from ctcbench.files import to_json
    if decoder is not None:
        if backend_name or functions:
            raise click.UsageError("--decoder: expected it alone, got --backend or --function "
                                   "too")
        backend_name, named = decoder, f"--decoder {decoder}"
    else:
        backend_name, named = one_backend(backend_name, functions, convention, device)
    result = run_fuzz(None if decoder else backend_name, out=out, resume=resume,
                      decoder=decoder, **command_line_settings(ctx, fuzz_settings()))
    finish_run(result)
    found = result.summary
    if fmt == "json":
        click.echo(to_json({**found, "run_dir": str(result.run_dir)}, indent=2))
    else:
        against = "brute force" if decoder else ctx.params["against"]
        click.echo(summary_text(found, backend_name, against, named))
    if found["found"]:
        raise SystemExit(1)


COMMANDS = (fuzz,)
