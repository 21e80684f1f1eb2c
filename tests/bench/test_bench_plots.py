"""Bench plots: every PNG is written, with one point per backend and size."""
from __future__ import annotations

import matplotlib.image

from ctcbench.bench.plots import bench_plots


TIMES = ("time_median_s", "time_min_s", "time_max_s")


def _rows():
    rows = []
    for T, t_np, t_torch in ((50, 0.002, 0.003), (500, 0.02, 0.03)):
        for name, t in (("numpy", t_np), ("torch", t_torch)):
            rows.append({"backend": name, "T": T, "N": 4, "C": 20, "L": 10, "cells": T * 4 * 21,
                         "status": "ok", "time_median_s": t, "time_min_s": t * 0.9,
                         "time_max_s": t * 1.2, "ratio_to_torch": t / t_torch,
                         "ratio_min": 0.6, "ratio_max": 0.7})
    rows.append({"backend": "torch-cuda", "T": 50, "N": 4, "C": 20, "L": 10, "cells": 4200,
                 "status": "skipped", "reason": "no CUDA"})
    return rows


def test_plots_are_png_files(tmp_path):
    """time_vs_cells, ratio_to_torch, ns_per_cell_vs_T (and thread_scaling, with two thread
    counts) are real PNG images; skipped rows are ignored."""
    paths = bench_plots(_rows(), tmp_path)
    assert [p.name for p in paths] == ["time_vs_cells.png", "ratio_to_torch.png",
                                       "ns_per_cell_vs_T.png"]
    two = _rows() + [{**r, "threads": 2, **{k: r[k] / 1.8 for k in TIMES}}
                     for r in _rows() if r["status"] == "ok"]
    (tmp_path / "two").mkdir()
    paths += bench_plots(two, tmp_path / "two")
    assert paths[-1].name == "thread_scaling.png"
    for p in paths:
        assert p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
        h, w, _ = matplotlib.image.imread(p).shape
        assert h > 200 and w > 400


def test_plots_survive_a_run_where_nothing_ran(tmp_path):
    """With only skipped rows the plots are still written (empty axes), not a crash."""
    paths = bench_plots([r for r in _rows() if r["status"] == "skipped"], tmp_path)
    assert all(p.exists() for p in paths)
