"""One picture of a compare run: how close every (case, backend/dtype) came to its tolerance,
drawn once: margins.png (``--plot``) and the report's copy of it."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ctcbench.compare.table import df_records
from ctcbench.plotting import DPI, pyplot
from ctcbench.runtime.status import Status

MARKS = {Status.MISMATCH: "×", Status.ERROR: "E", Status.CRASHED: "C", Status.TIMEOUT: "T",
         Status.KNOWN: "k", Status.UNSUPPORTED: "u"}


def margins_figure(rows: list[dict]):
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
        if r["status"] in (Status.OK, Status.MISMATCH, Status.KNOWN) and margin is not None:
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


def plot_margins(df: pd.DataFrame, path: str | Path) -> Path:
    """:func:`margins_figure` of a run's rows as a PNG at ``path``; returns the path."""
    path = Path(path)
    fig = margins_figure(df_records(df))
    fig.savefig(path, format="png", dpi=DPI, bbox_inches="tight")
    pyplot().close(fig)
    return path
