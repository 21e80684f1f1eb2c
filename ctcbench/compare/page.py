"""A compare run folder as report context: the summary, a case x backend matrix coloured by
status (failures first), each cell's numbers per dtype, the margins plot, the environment."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ctcbench.compare.checks import FAILING, STATUS_ORDER
from ctcbench.compare.kind import NUMBERS
from ctcbench.compare.table import summarize, tidy
from ctcbench.plotting import png_uri, pyplot
from ctcbench.runs.store import RowLog

def _rows(run_dir: Path) -> list[dict]:
    rows = RowLog(run_dir / "rows.jsonl").rows(floats=NUMBERS)
    if not rows and (run_dir / "rows.json").is_file():
        rows = json.loads((run_dir / "rows.json").read_text(encoding="utf-8"))
    return rows


def context(run_dir: Path, meta: dict, link_base: Path) -> dict:
    """The compare page of ``run_dir``."""
    run_dir = Path(run_dir)
    df = tidy(_rows(run_dir))
    summary = summarize(df)
    records = df.to_dict(orient="records")  # None: does not apply; NaN: a NaN result
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
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
    margins = compare_margins(cells)
    versions = config.get("backend_versions", {})
    return {"summary": summary, "backends": backends, "matrix": rows,
            "not_run": per_backend, "margins": margins, "versions": versions,
            "counts": {s: n for s, n in summary["counts"].items() if n},
            "failing": set(FAILING)}


MARKS = {"mismatch": "×", "error": "E", "crashed": "C", "timeout": "T", "known": "k",
         "unsupported": "u"}


def compare_margins(rows: list[dict]) -> str | None:
    """:func:`compare_margins_figure` as a PNG data URI; None when no row has a case."""
    fig = compare_margins_figure(rows)
    return None if fig is None else png_uri(fig)


def compare_margins_figure(rows: list[dict]):
    """Heat map of log10(worst error / tolerance), cases x backend:dtype, sized to its labels
    (> 0 failed). Marks: × mismatch, E error, C crashed, T timeout, k known, u unsupported.
    None when no row has a case."""
    rows = [r for r in rows if r.get("case") != "*"]
    if not rows:
        return None
    plt = pyplot()
    cases = sorted({r["case"] for r in rows}, key=lambda c: next(
        (r.get("family") or "", c) for r in rows if r["case"] == c))
    columns = sorted({f"{r['backend']}:{r['dtype']}" for r in rows})
    grid = np.full((len(cases), len(columns)), np.nan)  # (cases, backend:dtype)
    fig, ax = plt.subplots(figsize=(max(6.5, 3.2 + 0.55 * len(columns)), 1.2 + 0.26 * len(cases)))
    for r in rows:
        i, j = cases.index(r["case"]), columns.index(f"{r['backend']}:{r['dtype']}")
        margin = r.get("margin")
        if r["status"] in ("ok", "mismatch", "known") and margin is not None:
            grid[i, j] = np.log10(max(float(margin), 1e-12)) if np.isfinite(margin) else 3.0
        if r["status"] in MARKS:
            ax.text(j, i, MARKS[r["status"]], ha="center", va="center", fontsize=9,
                    fontweight="bold")
    image = ax.imshow(np.clip(grid, -8, 2), cmap="RdYlGn_r", vmin=-8, vmax=2, aspect="auto",
                      interpolation="nearest")
    ax.set_xticks(range(len(columns)), columns, rotation=40, ha="right", fontsize=8)
    ax.set_yticks(range(len(cases)), cases, fontsize=8)
    bar = fig.colorbar(image, ax=ax, fraction=0.04, pad=0.02)
    bar.set_label("log10(error / tolerance)", fontsize=8)
    bar.ax.tick_params(labelsize=8)
    return fig
