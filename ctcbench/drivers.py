"""The drivers' run kinds, in one table, and the pages of their run folders.

Each driver declares its kind once, in ``ctcbench/<driver>/kind.py``, and is found by that
file: the command line and ``ctcbench report`` loop over ``DRIVERS``. Adding a driver:
docs/layout.md.
"""
from __future__ import annotations

import functools
import importlib
import os
import sys
from pathlib import Path

from ctcbench.runs.kinds import ROWS, RunKind, identify

HERE = Path(__file__).resolve().parent
DRIVERS = tuple(sorted(p.parent.name for p in HERE.glob("*/kind.py")))  # ctcbench/<name>/kind.py
ROWS_TEMPLATE = "rows.html.j2"  # the page of a kind with no page.html.j2: its rows as a table


@functools.cache
def kinds() -> dict[str, RunKind]:
    """name -> the ``RunKind`` its driver declares."""
    return {name: importlib.import_module(f"ctcbench.{name}.kind").KIND for name in DRIVERS}


def run_page(run_dir: Path, link_base: Path, body=None) -> dict:
    """What the page shows of one run folder (``body(run_dir, meta, link_base)`` instead of its
    kind's context, where given); one-line ValueError for a folder that is no run, of a kind
    this version does not know, or of a newer row format."""
    run_dir = Path(run_dir)
    kind, meta = identify(run_dir, kinds())
    body = (body or (kind.page_context if kind.context else rows_context))(run_dir, meta,
                                                                          link_base)
    template = kind.template if (HERE / kind.template).is_file() else ROWS_TEMPLATE
    files = [p for pattern in ("rows.jsonl", "meta.json", *kind.exports)
             for p in sorted(run_dir.glob(pattern.rstrip("/"))) if p.name != "report.html"]
    links = [(p.name + ("/" if p.is_dir() else ""), Path(os.path.relpath(p, link_base)).as_posix())
             for p in files]
    return {"kind": kind.name, "template": template, "name": run_dir.resolve().name,
            "dir": str(run_dir), "env": meta.get("environment") or {}, "body": body,
            "files": links}


def rows_context(run_dir: Path, meta: dict, link_base: Path) -> dict:
    """The context of a kind that declares none: its rows and their columns, in order."""
    from ctcbench.runs.store import RowLog
    kind = kinds()[meta["kind"]]
    rows = RowLog(Path(run_dir) / ROWS).rows(floats=kind.floats)
    return {"rows": rows, "columns": list(dict.fromkeys(c for r in rows for c in r))}


def write_report(run_dirs, out: Path | None = None) -> Path:
    """Write the HTML page of ``run_dirs`` (run folders of any kind, side by side) to ``out``;
    default ``<run_dir>/report.html`` for one folder. Two bench runs also get a before/after
    table (the first is "before"). Returns the path written."""
    from ctcbench.files import check_output_file
    from ctcbench.report import render_page, write_page
    run_dirs = [Path(d) for d in run_dirs]
    if not run_dirs:
        raise ValueError("RUN_DIR: expected at least one run folder, got none")
    for run_dir in run_dirs:  # the folders are what was asked for: said before --out is
        identify(run_dir, kinds())
    if out is None:
        if len(run_dirs) > 1:
            raise ValueError(f"--out: expected an HTML file for a report of {len(run_dirs)} "
                             "run folders, got none")
        out = run_dirs[0] / "report.html"
    out = Path(out)
    if out.is_dir():
        raise ValueError(f"--out: expected an HTML file path, got the folder {str(out)!r}")
    check_output_file(out, "--out", "an HTML", (".html", ".htm"))
    link_base = out.resolve().parent
    runs = [run_page(d, link_base) for d in run_dirs]
    before_after = None
    kind = kinds()[runs[0]["kind"]]
    if len(runs) == 2 and runs[1]["kind"] == kind.name and kind.pair:  # two runs of a kind
        before_after = kind.pair_rows(runs[0]["body"]["rows"], runs[1]["body"]["rows"])
    title = "ctcbench " + " + ".join(dict.fromkeys(r["kind"] for r in runs)) + " report"
    return write_page(out, render_page(runs, title, before_after))


def write_part_pages(run_dir: Path) -> list[Path]:
    """A folder's page of each of its parts alone, ``<run_dir>/pages/<part>.html``, for a
    kind that declares ``pages`` (a datasheet: one per backend; ``report.html`` holds them
    side by side). Returns the paths written."""
    from ctcbench.report import render_page, write_page
    run_dir = Path(run_dir)
    kind, _ = identify(run_dir, kinds())
    out = []
    for name in kind.page_parts(run_dir):
        path = run_dir / "pages" / f"{name}.html"
        run = run_page(run_dir, path.parent,
                       body=functools.partial(kind.page_context, only=name))
        out.append(write_page(path, render_page([run], f"ctcbench {kind.name}: {name}")))
    return out


def finish_run(result, *, named: bool = False):
    """A driver's run folder ends with its report.html, written here after the driver
    returned (no driver imports the report). The folder is said once: here, unless the
    command's own output names it (``named``)."""
    result.files.append(write_report([result.run_dir]))
    resumed = f"{result.resumed} rows kept from the earlier run" if result.resumed else ""
    if not named:
        print(f"run folder: {result.run_dir}" + (f" ({resumed})" if resumed else ""),
              file=sys.stderr)
    elif resumed:
        print(f"resumed: {resumed}", file=sys.stderr)
    return result
