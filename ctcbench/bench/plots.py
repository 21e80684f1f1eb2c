"""Bench plots (matplotlib, Agg, PNG): time vs DP cells, each backend's ratio to torch, time
per DP cell against T, and (with several ``--threads``) time against the thread count."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ctcbench.plotting import plain_log, pyplot
from ctcbench.runtime.status import Status

DPI = 110


def _ok(rows):
    return [r for r in rows if r.get("status") == Status.OK and r.get("time_median_s") is not None]


def _by_backend(rows) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = {}
    for r in rows:
        out.setdefault(r["backend"], []).append(r)
    return out


def _finish(fig, ax, *, legend_size=None, grid_axis: str = "both"):
    """The ending every figure shares: grid, a legend when there is anything to label."""
    ax.grid(True, axis=grid_axis, which="both", alpha=0.3)
    if ax.get_legend_handles_labels()[0]:
        ax.legend(fontsize=legend_size)
    fig.tight_layout()
    return fig


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=DPI)
    pyplot().close(fig)
    return path


def time_vs_cells_figure(rows: list[dict]):
    """Median time per call (min-max bars) against T*N*S cells, log-log, one colour per backend."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    for name, rs in sorted(_by_backend(_ok(rows)).items()):
        rs = sorted(rs, key=lambda r: r["cells"])
        cells = np.array([r["cells"] for r in rs], dtype=float)
        med = np.array([r["time_median_s"] for r in rs]) * 1e3
        lo = med - np.array([r["time_min_s"] for r in rs]) * 1e3
        hi = np.array([r["time_max_s"] for r in rs]) * 1e3 - med
        ax.errorbar(cells, med, yerr=[lo, hi], fmt="o", ms=4, capsize=2, label=name, alpha=0.8)
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log(ax.yaxis)
    ax.set_xlabel("DP cells T·N·S (S = 2L+1); points stacked at one size are the C sweep")
    ax.set_ylabel("forward+backward time per call (ms)")
    ax.set_title("CTC forward+backward (log_softmax included): time vs size")
    return _finish(fig, ax)


def ratio_to_torch_figure(rows: list[dict]):
    """Each backend's time / torch's time per size (median of paired repeats, min-max bars)."""
    plt = pyplot()
    rows = [r for r in _ok(rows) if r["backend"] != "torch" and r.get("ratio_to_torch") is not None]
    sizes = sorted({(r["cells"], r["T"], r["N"], r["C"], r["L"]) for r in rows})
    index = {s: i for i, s in enumerate(sizes)}
    backends = sorted({r["backend"] for r in rows})
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.32 * max(len(sizes), 1)))
    offsets = np.linspace(-0.2, 0.2, len(backends)) if len(backends) > 1 else [0.0]
    for off, name in zip(offsets, backends):
        rs = [r for r in rows if r["backend"] == name]
        y = np.array([index[(r["cells"], r["T"], r["N"], r["C"], r["L"])] for r in rs]) + off
        x = np.array([r["ratio_to_torch"] for r in rs])
        lo = x - np.array([r["ratio_min"] for r in rs])
        hi = np.array([r["ratio_max"] for r in rs]) - x
        ax.errorbar(x, y, xerr=[lo, hi], fmt="o", ms=4, capsize=2, label=name)
    ax.axvline(1.0, color="grey", lw=1, ls="--")
    ax.set_xscale("log")
    plain_log(ax.xaxis)
    ax.set_yticks(range(len(sizes)))
    ax.set_yticklabels([f"T={T} N={N} C={C} L={L}" for _, T, N, C, L in sizes], fontsize=8)
    ax.set_xlabel("time / torch time, same run (< 1: faster than torch)")
    ax.set_title("Ratio to torch per size")
    return _finish(fig, ax, legend_size=8, grid_axis="x")


def _fewest_threads(rows) -> list[dict]:
    """The rows measured with the fewest threads (size plots compare like with like)."""
    least = min((r.get("threads", 1) for r in rows), default=1)
    return [r for r in rows if r.get("threads", 1) == least]


def ns_per_cell_vs_T_figure(rows: list[dict]):
    """Nanoseconds per DP cell against T, one line per backend and (N, C, L) measured at two
    or more T; a flat line means time grows linearly with T."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    for name, rs in sorted(_by_backend(_fewest_threads(_ok(rows))).items()):
        groups: dict[tuple, list[dict]] = {}
        for r in rs:
            groups.setdefault((r["N"], r["C"], r["L"]), []).append(r)
        for (N, C, L), g in sorted(groups.items()):
            if len({r["T"] for r in g}) < 2:
                continue
            g = sorted(g, key=lambda r: r["T"])
            ns = [r["time_median_s"] / r["cells"] * 1e9 for r in g]
            ax.plot([r["T"] for r in g], ns, "o-", ms=4, label=f"{name} N={N} C={C} L={L}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log(ax.yaxis)
    ax.set_xlabel("T (frames)")
    ax.set_ylabel("ns per DP cell (median time / T·N·S)")
    ax.set_title("Time per DP cell against T (flat: linear in T)")
    return _finish(fig, ax, legend_size=7)


def thread_scaling_figure(rows: list[dict]):
    """Median time against the thread count, one line per backend and size measured at two
    or more counts (min-max bars), with the ideal 1/threads line from one thread dashed."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 5))
    for name, rs in sorted(_by_backend(_ok(rows)).items()):
        groups: dict[tuple, list[dict]] = {}
        for r in rs:
            groups.setdefault((r["T"], r["N"], r["C"], r["L"]), []).append(r)
        for (T, N, C, L), g in sorted(groups.items()):
            if len({r.get("threads", 1) for r in g}) < 2:
                continue
            g = sorted(g, key=lambda r: r.get("threads", 1))
            n = np.array([r.get("threads", 1) for r in g])
            med = np.array([r["time_median_s"] for r in g]) * 1e3
            lo = np.maximum(med - np.array([r["time_min_s"] for r in g]) * 1e3, 0)
            hi = np.maximum(np.array([r["time_max_s"] for r in g]) * 1e3 - med, 0)
            line = ax.errorbar(n, med, yerr=[lo, hi], fmt="o-", ms=4, capsize=2,
                               label=f"{name} T={T} N={N} C={C} L={L}")
            ax.plot(n, med[0] * n[0] / n, ls="--", lw=0.8, color=line[0].get_color())
    ax.set_yscale("log")
    plain_log(ax.yaxis)
    ax.set_xticks(sorted({r.get("threads", 1) for r in _ok(rows)}))
    ax.set_xlabel("threads (--threads)")
    ax.set_ylabel("forward+backward time per call (ms)")
    ax.set_title("Thread scaling (dashed: ideal, time / threads)")
    return _finish(fig, ax, legend_size=7)


def bench_figures(rows: list[dict]) -> dict:
    """Every figure by the file name it is saved under (the thread scaling one only when several
    thread counts were measured)."""
    figures = {"time_vs_cells.png": time_vs_cells_figure(_fewest_threads(rows)),
               "ratio_to_torch.png": ratio_to_torch_figure(_fewest_threads(rows)),
               "ns_per_cell_vs_T.png": ns_per_cell_vs_T_figure(rows)}
    if len({r.get("threads", 1) for r in rows}) > 1:
        figures["thread_scaling.png"] = thread_scaling_figure(rows)
    return figures


def plot_time_vs_cells(rows: list[dict], path: Path) -> Path:
    return _save(time_vs_cells_figure(rows), path)


def plot_ratio_to_torch(rows: list[dict], path: Path) -> Path:
    return _save(ratio_to_torch_figure(rows), path)


def plot_ns_per_cell_vs_T(rows: list[dict], path: Path) -> Path:
    return _save(ns_per_cell_vs_T_figure(rows), path)


def plot_thread_scaling(rows: list[dict], path: Path) -> Path:
    return _save(thread_scaling_figure(rows), path)


def bench_plots(rows: list[dict], run_dir: Path) -> list[Path]:
    """Every figure of :func:`bench_figures` saved into ``run_dir``; returns their paths."""
    run_dir = Path(run_dir)
    return [_save(fig, run_dir / name) for name, fig in bench_figures(rows).items()]
