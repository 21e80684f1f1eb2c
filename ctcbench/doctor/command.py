"""``ctcbench doctor``: the command over ``ctcbench.doctor.examine`` (and, with ``--decoder``,
``ctcbench.doctor.decoder.examine_decoder``; with ``--aligner``,
``ctcbench.doctor.aligner.examine_aligner``). It writes no run folder: the findings go to
stdout, ``--html`` and ``--plot`` to the files they name."""
from __future__ import annotations

from pathlib import Path

import click

from ctcbench.cli_options import format_option
from ctcbench.doctor.config import DoctorSettings, conflict, doctor_settings
from ctcbench.settings import SettingsCommand


@click.command(cls=SettingsCommand, settings=doctor_settings)  # options made on first use
@click.argument("file", type=click.Path(dir_okay=False))
@format_option("table", "json")
@click.pass_context
def doctor(ctx, file, fmt, **_settings):
    """Diagnose the CTC inputs saved in FILE (.npz or .pt) and say how to fix them."""
    from ctcbench.files import check_output_file
    cfg = DoctorSettings(**{s.key: ctx.params[s.param] for s in doctor_settings()})
    problem = conflict(vars(cfg))
    if problem:
        raise click.UsageError(problem)
    if cfg.decoder is not None:
        return _doctor_decoder(file, cfg, fmt)
    if cfg.aligner is not None:
        return _doctor_aligner(file, cfg, fmt)
    if cfg.transformers_config is not None:
        return _doctor_transformers(file, cfg, fmt)
    from ctcbench.doctor.examine import examine
    for option, path, what, suffixes in (("--plot", cfg.plot, "a PNG", (".png",)),
                                         ("--html", cfg.html, "an HTML", (".html", ".htm"))):
        if path:
            check_output_file(path, option, what, suffixes)
    found = examine(file, blank=cfg.blank, layout=cfg.layout, reduction=cfg.reduction,
                    explain=cfg.explain, device=cfg.device, max_bytes=cfg.max_bytes)
    result, inputs = found.result, found.inputs
    click.echo(found.to_json() if fmt == "json" else found.format_table())
    if cfg.plot:
        from ctcbench.doctor.plot import plot_frames
        click.echo(f"plot: {plot_frames(cfg.plot, **inputs, layout=cfg.layout)}", err=True)
    if cfg.html:
        html = write_doctor_report(result, inputs, cfg.html, layout=cfg.layout, source=file)
        click.echo(f"report: {html}", err=True)
    failing = ("error", "warning") if cfg.strict else ("error",)
    if not cfg.explain and result.worst() in failing:
        raise SystemExit(1)


def _doctor_decoder(file, cfg: DoctorSettings, fmt) -> None:
    """``doctor FILE --decoder``: the user's decoder checked; exit 1 on any finding."""
    from ctcbench.doctor.decoder import examine_decoder
    from ctcbench.files import to_json
    found = examine_decoder(file, cfg.decoder, blank=cfg.blank, layout=cfg.layout,
                            beam=cfg.beam, alphabet=cfg.alphabet, max_bytes=cfg.max_bytes)
    click.echo(to_json(found.to_dict(), indent=2) if fmt == "json" else found.format_table())
    if not found.ok:
        raise SystemExit(1)


def _doctor_aligner(file, cfg: DoctorSettings, fmt) -> None:
    """``doctor FILE --aligner``: the user's aligner checked; exit 1 on any finding."""
    from ctcbench.doctor.aligner import examine_aligner
    from ctcbench.files import to_json
    found = examine_aligner(file, cfg.aligner, blank=cfg.blank, layout=cfg.layout,
                            max_bytes=cfg.max_bytes)
    click.echo(to_json(found.to_dict(), indent=2) if fmt == "json" else found.format_table())
    if not found.ok:
        raise SystemExit(1)


# ctcbench.transformers builds on the doctor, so the doctor names its reader as the registries
# name backends, by dotted path imported on use, and never imports that package itself
TRANSFORMERS_READER = "ctcbench.transformers.saved:examine_saved"


def _doctor_transformers(file, cfg: DoctorSettings, fmt) -> None:
    """``doctor FILE --transformers-config``: a *ForCTC batch diagnosed in the model's terms."""
    from ctcbench.runtime.factory import load_factory
    examine_saved = load_factory(TRANSFORMERS_READER)
    found = examine_saved(file, cfg.transformers_config, max_bytes=cfg.max_bytes)
    click.echo(found.to_json() if fmt == "json" else found.format_table())
    failing = ("error", "warning") if cfg.strict else ("error",)
    if found.result.worst() in failing:
        raise SystemExit(1)


COMMANDS = (doctor,)


def write_doctor_report(result, inputs: dict, out: Path, *, layout: str = "TNC",
                        source: str = "") -> Path:
    """Write the doctor's ``result`` (a diagnosis of ``inputs``, read from ``source``) as one
    HTML page at ``out``: the report's frame around ``doctor/page.html.j2``."""
    from ctcbench.doctor.page import doctor_context
    from ctcbench.environment import environment
    from ctcbench.report import render_page, write_page
    body = doctor_context(result, inputs, layout=layout, source=source)
    run = {"kind": "doctor", "template": "doctor/page.html.j2", "name": body["name"], "dir": source,
           "env": environment(), "body": body}
    return write_page(Path(out), render_page([run], "ctcbench doctor report"))
