"""One picture of a compare run: how close every (case, backend/dtype) came to its tolerance."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ctcbench.plotting import pyplot

MARKS = {"mismatch": "x", "error": "E", "unsupported": "u"}


def margins_figure(df: pd.DataFrame):
    """Heat map of log10(margin) (worst error / allowed error), cases x backend:dtype.

    Green cells passed with room to spare, yellow came close, red failed (marked x); ``E`` is an
    error, ``u`` unsupported, blank not run.
    """
    plt = pyplot()
    rows = df[df["case"] != "*"].copy()
    rows["column"] = rows["backend"] + ":" + rows["dtype"]
    cases = list(rows.sort_values(["family", "case"])["case"].drop_duplicates())
    columns = sorted(set(rows["column"]))
    grid = np.full((len(cases), len(columns)), np.nan)  # (cases, backend:dtype)
    marks = {}
    for r in rows.itertuples():
        i, j = cases.index(r.case), columns.index(r.column)
        margin = r.margin if r.status in ("ok", "mismatch") else np.nan
        if margin is not None and not pd.isna(margin):
            grid[i, j] = np.log10(max(float(margin), 1e-12)) if np.isfinite(margin) else 3.0
        if r.status in MARKS:
            marks[i, j] = MARKS[r.status]
    fig, ax = plt.subplots(figsize=(2.0 + 0.9 * len(columns), 1.5 + 0.28 * len(cases)))
    image = ax.imshow(np.clip(grid, -8, 2), cmap="RdYlGn_r", vmin=-8, vmax=2, aspect="auto")
    for (i, j), m in marks.items():
        ax.text(j, i, m, ha="center", va="center", fontsize=8, fontweight="bold")
    ax.set_xticks(range(len(columns)), columns, rotation=45, ha="right", fontsize=8)
    ax.set_yticks(range(len(cases)), cases, fontsize=8)
    bar = fig.colorbar(image, ax=ax, shrink=0.6)
    bar.set_label("log10(error / tolerance); > 0 fails")
    ax.set_title("ctcbench compare: worst error relative to tolerance", fontsize=10)
    fig.tight_layout()
    return fig


def plot_margins(df: pd.DataFrame, path: str | Path) -> Path:
    """:func:`margins_figure` as a PNG at ``path``; returns the path."""
    path = Path(path)
    fig = margins_figure(df)
    fig.savefig(path, dpi=110)
    pyplot().close(fig)
    return path
