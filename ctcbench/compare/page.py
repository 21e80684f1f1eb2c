"""A compare run folder as report context: the summary, a case x backend matrix coloured by
status (failures first), each cell's numbers per dtype, the margins plot, the environment."""
from __future__ import annotations

import json
from pathlib import Path

from ctcbench.runtime.status import FAILING, ORDER
from ctcbench.compare.causes import cause_lines, explained_rows, saved
from ctcbench.compare.kind import NUMBERS
from ctcbench.compare.table import summarize, tally, tidy
from ctcbench.compare.plot import margins_figure
from ctcbench.plotting import file_uri, png_uri
from ctcbench.runs.store import RowLog

def _rows(run_dir: Path) -> list[dict]:
    rows = RowLog(run_dir / "rows.jsonl").rows(floats=NUMBERS)
    if not rows and (run_dir / "rows.json").is_file():
        rows = json.loads((run_dir / "rows.json").read_text(encoding="utf-8"))
    return rows


def context(run_dir: Path, meta: dict, link_base: Path) -> dict:
    """The compare page of ``run_dir``."""
    run_dir = Path(run_dir)
    causes = saved(meta)  # the loss faults the run named (compare.causes)
    df = tidy(explained_rows(_rows(run_dir), causes))
    summary = summarize(df)
    records = df.to_dict(orient="records")  # None: does not apply; NaN: a NaN result
    rank = {s: i for i, s in enumerate(ORDER)}
    config = meta.get("config", {})
    per_backend = [r for r in records if r["case"] == "*"]  # skipped / failed to load
    cells = [r for r in records if r["case"] != "*"]
    backends = [b for b in dict.fromkeys(list(config.get("backends", [])) +
                                         [r["backend"] for r in cells])
                if any(r["backend"] == b for r in cells)]
    tolerances = config.get("tolerances") or {}  # as the run used them, "case/dtype" -> fields
    matrix: dict[str, dict] = {}
    for r in cells:
        r["tolerance"] = tolerances.get(f"{r['case']}/{r['dtype']}")
        cell = matrix.setdefault(r["case"], {"family": r.get("family") or "", "cells": {}})
        cell["cells"].setdefault(r["backend"], []).append(r)
    rows = []
    for case, entry in matrix.items():
        by_backend = {}
        for backend, rs in entry["cells"].items():
            rs.sort(key=lambda r: (rank.get(r["status"], 99), r["dtype"]))
            worst = rs[0]["status"]
            bad = sum(r["status"] == worst for r in rs)
            by_backend[backend] = {"status": worst, "rows": rs, "failing": worst in FAILING,
                                   "label": worst if bad == len(rs) else f"{worst} {bad}/{len(rs)}"}
        worst_rank = min(rank.get(c["status"], 99) for c in by_backend.values())
        rows.append({"case": case, "family": entry["family"], "cells": by_backend,
                     "rank": worst_rank, "failing": worst_rank < len(FAILING)})
    rows.sort(key=lambda r: (r["rank"], r["family"], r["case"]))
    margins = compare_margins(cells, run_dir)
    versions = config.get("backend_versions", {})
    return {"summary": summary, "backends": backends, "matrix": rows,
            "not_run": per_backend, "margins": margins, "versions": versions,
            "causes": cause_lines(causes),
            "tally": [{"status": st, "words": words} for st, words in tally(df)],
            "failing": set(FAILING)}


def compare_margins(rows: list[dict], run_dir: Path | None = None) -> str | None:
    """The margins heat map as a PNG data URI: the run folder's margins.png where it was drawn
    after the last row was written, else drawn here; None when no row has a case."""
    if run_dir is not None:
        png, log = Path(run_dir) / "margins.png", Path(run_dir) / "rows.jsonl"
        if png.is_file() and log.is_file() and png.stat().st_mtime >= log.stat().st_mtime:
            return file_uri(png)
    fig = margins_figure(rows)
    return None if fig is None else png_uri(fig)
