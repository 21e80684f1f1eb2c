"""Plots for the HTML report, inlined as ``data:image/png;base64`` URIs (matplotlib, Agg), so
a report is one file that needs nothing from the network."""
from __future__ import annotations

import base64
import io
import tempfile
from pathlib import Path

import numpy as np

DPI = 100


def pyplot():
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    return plt


def png_uri(fig) -> str:
    """The figure as a PNG data URI; the figure is closed."""
    plt = pyplot()
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=DPI, bbox_inches="tight")
    plt.close(fig)
    return "data:image/png;base64," + base64.b64encode(buf.getvalue()).decode("ascii")


def file_uri(path: Path) -> str:
    """A PNG already on disk as a data URI."""
    return "data:image/png;base64," + base64.b64encode(Path(path).read_bytes()).decode("ascii")


def written_uri(write) -> str:
    """Run ``write(path)`` (a plot function of the drivers that takes a PNG path) into a
    temporary file and return the picture as a data URI."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "plot.png"
        write(path)
        return file_uri(path)


def _plain_log(axis) -> None:
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
    axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    axis.set_minor_formatter(NullFormatter())


def bench_scaling(rows: list[dict]) -> str | None:
    """Two log-log panels against DP cells T·N·S: median time per call and ns per cell, one
    line per backend (min-max bars on time). None when no row has a time."""
    ok = [r for r in rows if r.get("status") == "ok" and r.get("time_median_s") is not None]
    if not ok:
        return None
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.2))
    for name in sorted({r["backend"] for r in ok}):
        rs = sorted((r for r in ok if r["backend"] == name), key=lambda r: r["cells"])
        cells = np.array([r["cells"] for r in rs], dtype=float)  # (sizes,)
        med = np.array([r["time_median_s"] for r in rs]) * 1e3  # (sizes,) ms
        lo = med - np.array([r.get("time_min_s", r["time_median_s"]) for r in rs]) * 1e3
        hi = np.array([r.get("time_max_s", r["time_median_s"]) for r in rs]) * 1e3 - med
        line = left.errorbar(cells, med, yerr=[lo, hi], fmt="o-", ms=4, lw=1.2, capsize=2,
                             label=name)
        right.plot(cells, [r["ns_per_cell"] for r in rs], "o-", ms=4, lw=1.2,
                   color=line.lines[0].get_color(), label=name)
    for ax, ylabel, title in ((left, "time per call (ms)", "forward+backward time"),
                              (right, "ns per DP cell", "cost per DP cell")):
        ax.set_xscale("log")
        ax.set_yscale("log")
        _plain_log(ax.xaxis)
        _plain_log(ax.yaxis)
        ax.set_xlabel("DP cells T·N·S (S = 2L+1)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=11)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=9, frameon=False)
    fig.tight_layout()
    return png_uri(fig)


PANELS = (("test_loss", "held-out CTC loss", True), ("cer", "held-out CER (greedy)", False),
          ("blank_frac", "frames whose argmax is blank", False),
          ("grad_norm", "gradient norm", True))


def convergence_bands(curves, plateau_ends: dict) -> str | None:
    """2x2 panels (loss, CER, blank fraction, gradient norm) against step: per group of runs
    that differ only in seed, the median over seeds as a line and the min-max band shaded.
    ``plateau_ends`` maps a group label to its runs' plateau end steps, drawn as dotted
    vertical lines. ``curves``: a DataFrame with columns group, seed, step and the panels'."""
    if curves is None or curves.empty:
        return None
    plt = pyplot()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7), sharex=True)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    groups = list(dict.fromkeys(curves["group"]))
    for ax, (col, title, log) in zip(axes.flat, PANELS):
        for i, group in enumerate(groups):
            color = colors[i % len(colors)]
            g = curves[curves["group"] == group]
            wide = g.pivot_table(index="step", columns="seed", values=col)  # (steps, seeds)
            if wide.empty:
                continue
            ax.plot(wide.index, wide.median(axis=1), color=color, lw=1.8, label=group)
            if wide.shape[1] > 1:
                ax.fill_between(wide.index, wide.min(axis=1), wide.max(axis=1), color=color,
                                alpha=0.2, lw=0)
            for step in plateau_ends.get(group, ()):
                ax.axvline(step, color=color, ls=":", lw=1.2, alpha=0.9)
        ax.set_title(title, fontsize=11)
        ax.grid(alpha=0.25)
        if log and (curves[col] > 0).any():
            ax.set_yscale("log")
            _plain_log(ax.yaxis)
        if col in ("cer", "blank_frac"):
            ax.set_ylim(-0.02, 1.05)
    for ax in axes[1]:
        ax.set_xlabel("training step")
    axes[0, 0].plot([], [], color="grey", ls=":", label="plateau end (one line per seed)")
    axes[0, 0].legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return png_uri(fig)


MARKS = {"mismatch": "×", "error": "E", "crashed": "C", "timeout": "T", "known": "k",
         "unsupported": "u"}


def compare_margins(rows: list[dict]) -> str | None:
    """Heat map of log10(worst error / tolerance), cases x backend:dtype, sized to its labels
    (> 0 failed). Marks: × mismatch, E error, C crashed, T timeout, k known, u unsupported."""
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
    return png_uri(fig)
