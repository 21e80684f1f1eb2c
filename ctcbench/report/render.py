"""``write_report``: one self-contained HTML page (inline CSS, inline plots, no network) for
one or more run folders, built with Jinja2 templates (autoescaped)."""
from __future__ import annotations

import datetime as _dt
from pathlib import Path

from ctcbench.files import atomic_write
from ctcbench.report.format import FILTERS
from ctcbench.report.kinds import read_meta, run_kind


def environment():
    import jinja2
    env = jinja2.Environment(loader=jinja2.PackageLoader("ctcbench.report", "templates"),
                             autoescape=True,
                             trim_blocks=True, lstrip_blocks=True)
    env.filters.update(FILTERS)
    return env


def _run_context(run_dir: Path, link_base: Path) -> dict:
    from ctcbench.report.bench import bench_context
    from ctcbench.report.compare import compare_context
    from ctcbench.report.convergence import convergence_context
    meta = read_meta(run_dir)
    kind = run_kind(run_dir, meta)
    if kind == "compare":
        body = compare_context(run_dir, meta)
    elif kind == "bench":
        body = bench_context(run_dir, meta)
    else:
        body = convergence_context(run_dir, meta, link_base)
    env = meta.get("environment") or {}
    return {"kind": kind, "name": run_dir.resolve().name, "dir": str(run_dir), "env": env,
            "body": body}


def _render(runs: list[dict], title: str, before_after=None) -> str:
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return environment().get_template("report.html.j2").render(
        runs=runs, title=title, before_after=before_after, generated=stamp)


def _write(out: Path, html: str) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(out, html)


def write_report(run_dirs: list[Path], out: Path | None = None) -> Path:
    """Write the HTML report of ``run_dirs`` (compare, bench or convergence folders, shown
    side by side) to ``out``; default ``<run_dir>/report.html`` for one folder. Two bench
    runs also get a before/after table (the first is "before"). Returns the path written."""
    run_dirs = [Path(d) for d in run_dirs]
    if not run_dirs:
        raise ValueError("RUN_DIR: expected at least one run folder, got none")
    if out is None:
        if len(run_dirs) > 1:
            raise ValueError(f"--out: expected an HTML file for a report of {len(run_dirs)} "
                             "run folders, got none")
        out = run_dirs[0] / "report.html"
    out = Path(out)
    if out.is_dir():
        raise ValueError(f"--out: expected an HTML file path, got the folder {str(out)!r}")
    link_base = out.resolve().parent
    runs = [_run_context(d, link_base) for d in run_dirs]
    before_after = None
    if len(runs) == 2 and all(r["kind"] == "bench" for r in runs):
        from ctcbench.report.bench import before_after as pair
        before_after = pair(runs[0]["body"]["rows"], runs[1]["body"]["rows"])
    title = "ctcbench " + " + ".join(dict.fromkeys(r["kind"] for r in runs)) + " report"
    return _write(out, _render(runs, title, before_after))


def write_doctor_report(result, inputs: dict, out: Path, *, layout: str = "TNC",
                        source: str = "") -> Path:
    """Write the doctor's ``result`` (a diagnosis of ``inputs``, read from ``source``) as one
    HTML page at ``out``."""
    from ctcbench.environment import environment as machine
    from ctcbench.report.doctor import doctor_context
    body = doctor_context(result, inputs, layout=layout, source=source)
    run = {"kind": "doctor", "name": body["name"], "dir": source, "env": machine(), "body": body}
    return _write(Path(out), _render([run], "ctcbench doctor report"))
