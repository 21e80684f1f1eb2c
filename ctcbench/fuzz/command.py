"""``ctcbench fuzz``: the command over ``ctcbench.fuzz.run.fuzz``."""
from __future__ import annotations

import click

from ctcbench.cli_options import (aligner_options, format_option, function_options, one_backend,
                                  out_options)
from ctcbench.drivers import finish_run
from ctcbench.fuzz.config import fuzz_settings
from ctcbench.settings import SettingsCommand, command_line_settings


@click.command(cls=SettingsCommand, settings=fuzz_settings)  # options made on first use
@click.option("--backend", "backend_name", default=None, metavar="NAME",
              help="Backend to fuzz (or --function).")
@click.option("--decoder", default=None, metavar="NAME",
              help="Decoder or aligner to fuzz instead, judged by brute force: a registered "
                   "name, or your own decoder function PKG.MOD:NAME (as compare --decoder).")
@aligner_options("Fuzz", multiple=False)
@function_options("Fuzz", known_issues=False)
@out_options("fuzz", resume_note=" (its stored failures are replayed first)")
@format_option("table", "json")
@click.pass_context
def fuzz(ctx, backend_name, decoder, aligner, score, functions, convention, device, out, resume,
         fmt, **_settings):
    """Search for the smallest problem on which a backend is wrong; exit 1 when one is found."""
    from ctcbench.fuzz.run import fuzz as run_fuzz, summary_text
    from ctcbench.files import to_json
    if decoder is not None or aligner is not None:
        option = "--decoder" if decoder is not None else "--aligner"
        if backend_name or functions or (decoder and aligner):
            raise click.UsageError(f"{option}: expected it alone, got --backend, --function "
                                   "or --aligner too")
        backend_name = decoder or aligner
        named = f"{option} {backend_name}" + (f" --score {score}" if score else "")
    else:
        backend_name, named = one_backend(backend_name, functions, convention, device)
    searched = decoder is not None or aligner is not None
    result = run_fuzz(None if searched else backend_name, out=out, resume=resume,
                      decoder=decoder, aligner=aligner, score=score,
                      **command_line_settings(ctx, fuzz_settings()))
    finish_run(result)
    found = result.summary
    if fmt == "json":
        click.echo(to_json({**found, "run_dir": str(result.run_dir)}, indent=2))
    else:
        against = "brute force" if searched else ctx.params["against"]
        click.echo(summary_text(found, backend_name, against, named))
    if found["found"]:
        raise SystemExit(1)


COMMANDS = (fuzz,)
