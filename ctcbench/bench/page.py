"""A bench run folder as report context: a sortable table (time, ns per DP cell, ratio to
torch, memory), the scaling plots, threads; and a before/after table for two bench runs."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ctcbench.bench.kind import KEY
from ctcbench.formatting import number
from ctcbench.plotting import plain_log, png_uri, pyplot
from ctcbench.runs.store import RowLog
from ctcbench.runtime.status import Status

SIZE = ("T", "N", "C", "L")
FIELDS = ("backend", *SIZE, "cells", "dtype", "status", "reason", "time_median_s", "time_min_s",
          "time_max_s", "ns_per_cell", "ratio_to_torch", "ratio_min", "ratio_max",
          "peak_rss_mb")  # every row has each (None when not measured), as the table shows them


def bench_rows(run_dir: Path) -> list[dict]:
    """The latest row per (backend, size, dtype), smallest sizes first."""
    run_dir = Path(run_dir)
    rows = RowLog(run_dir / "rows.jsonl").rows()
    if not rows and (run_dir / "bench.json").is_file():
        rows = json.loads((run_dir / "bench.json").read_text(encoding="utf-8"))
    latest = {tuple(r.get(k) for k in KEY): r for r in rows}
    rows = [{**{k: None for k in FIELDS}, **r} for r in latest.values()]
    return sorted(rows, key=lambda r: (r.get("cells") or 0, *(r.get(k) or 0 for k in SIZE),
                                                  r.get("backend", "")))


def context(run_dir: Path, meta: dict, link_base: Path) -> dict:
    """The bench page of ``run_dir``."""
    rows = bench_rows(run_dir)
    config = meta.get("config", {})
    skipped = [r for r in rows if r.get("status") == Status.SKIPPED]
    skipped = list({r["backend"]: r for r in skipped}.values())  # once per backend
    shown = [r for r in rows if r.get("status") != Status.SKIPPED]
    threads = {k: config[k] for k in ("threads", "torch_threads", "numpy_blas_threads")
               if k in config}
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    if "decoders" in config:  # bench --decoder: per frame against beam width
        return {"decoders": True, "rows": shown, "skipped": skipped, "threads": {},
                "all_ok": all(r.get("status") == Status.OK for r in shown),
                "beam_figure": beam_figure(shown),
                "settings": {k: config[k] for k in ("grid", "repeat", "warmup", "beams")
                             if k in config}}
    return {"rows": shown, "skipped": skipped,
            "all_ok": all(r.get("status") == Status.OK for r in shown), "backends": backends,
            "scaling": bench_scaling(shown), "threads": threads,
            "settings": {k: config[k] for k in ("grid", "repeat", "warmup", "dtype", "baseline",
                                                "reference",  # "reference": older runs' name
                                                "between_calls")
                         if k in config}}


def beam_figure(rows: list[dict]) -> str | None:
    """ns per frame against beam width, one line per decoder and size, as an inline PNG."""
    ok = [r for r in rows if r.get("status") == Status.OK and r.get("ns_per_frame")]
    if not ok:
        return None
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4))
    for key in dict.fromkeys((r["backend"], r["T"], r["N"], r["C"]) for r in ok):
        rs = sorted((r for r in ok if (r["backend"], r["T"], r["N"], r["C"]) == key),
                    key=lambda r: r["beam"])
        ax.plot([r["beam"] for r in rs], [r["ns_per_frame"] for r in rs], marker="o",
                label=f"{key[0]} T={key[1]} N={key[2]} C={key[3]}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    plain_log(ax.xaxis)
    plain_log(ax.yaxis)
    ax.set_xlabel("beam width")
    ax.set_ylabel("ns per frame")
    ax.legend(fontsize=7)
    fig.tight_layout()
    return png_uri(fig)


def before_after(before: list[dict], after: list[dict]) -> list[dict]:
    """One row per (backend, size, dtype) measured in both runs: both medians and after/before
    ratios of time and peak memory (> 1: slower / more memory after)."""
    def key(r):
        return (r.get("backend"), *(r.get(k) for k in SIZE), r.get("dtype"))
    old = {key(r): r for r in before if r.get("status") == Status.OK}
    out = []
    for r in after:
        o = old.get(key(r))
        if o is None or r.get("status") != Status.OK:
            continue
        t0, t1 = number(o.get("time_median_s")), number(r.get("time_median_s"))
        m0, m1 = number(o.get("peak_rss_mb")), number(r.get("peak_rss_mb"))
        out.append({**{k: r.get(k) for k in ("backend", *SIZE, "cells", "dtype")},
                    "before_s": t0, "after_s": t1,
                    "time_ratio": t1 / t0 if t0 and t1 is not None else None,
                    "before_mb": m0, "after_mb": m1,
                    "memory_ratio": m1 / m0 if m0 and m1 is not None else None})
    return out


def bench_scaling(rows: list[dict]) -> str | None:
    """:func:`bench_scaling_figure` as a PNG data URI; None when no row has a time."""
    fig = bench_scaling_figure(rows)
    return None if fig is None else png_uri(fig)


def bench_scaling_figure(rows: list[dict]):
    """Two log-log panels against DP cells T·N·S: median time per call and ns per cell, one
    line per backend (min-max bars on time). None when no row has a time."""
    ok = [r for r in rows if r.get("status") == Status.OK and r.get("time_median_s") is not None]
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
        plain_log(ax.xaxis)
        plain_log(ax.yaxis)
        ax.set_xlabel("DP cells T·N·S (S = 2L+1)")
        ax.set_ylabel(ylabel)
        ax.set_title(title, fontsize=11)
        ax.grid(True, which="both", alpha=0.25)
        ax.legend(fontsize=9, frameon=False)
    fig.tight_layout()
    return fig
