"""One self-contained HTML page (inline CSS, inline plots, no network) from the contexts of one
or more runs, with Jinja2 templates (autoescaped): the page's frame in ``templates/``, each
run's own template by its path below ``ctcbench/`` (a driver keeps its ``page.html.j2`` beside
its code). Which template and context a run folder gets is its kind's (``ctcbench.drivers``);
this module knows no driver."""
from __future__ import annotations

import datetime as _dt
from pathlib import Path

from ctcbench.files import atomic_write
from ctcbench.formatting import FILTERS


def environment():
    import jinja2
    here = Path(__file__).resolve().parent
    env = jinja2.Environment(loader=jinja2.FileSystemLoader([here / "templates", here.parent]),
                             autoescape=True, trim_blocks=True, lstrip_blocks=True)
    env.filters.update(FILTERS)
    return env


def render_page(runs: list[dict], title: str, before_after=None) -> str:
    """The page of ``runs``, each ``{"kind", "template", "name", "dir", "env", "body"}``
    (``body``: the kind's context), side by side; ``before_after``: rows for the table that
    compares two bench runs."""
    stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return environment().get_template("report.html.j2").render(
        runs=runs, title=title, before_after=before_after, generated=stamp)


def write_page(out: Path, html: str) -> Path:
    """``html`` to ``out``, atomically (a reader never sees half a page)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    return atomic_write(out, html)
