"""Bench figures, the run folder's PNGs (ctcbench.bench.plots) and the report's scaling panels
(ctcbench.bench.page): panels, scales, labels, one entry per backend, and the plotted points
against values worked out by hand from the rows."""
from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from ctcbench.bench.page import bench_scaling, bench_scaling_figure
from ctcbench.bench.plots import bench_figures, bench_plots
from ctcbench.plotting import pyplot

TIMES = ("time_median_s", "time_min_s", "time_max_s")
MEDIAN_S = {("numpy", 50): 0.002, ("torch", 50): 0.003, ("numpy", 500): 0.02,
            ("torch", 500): 0.03}  # 1 thread; with 2 threads each is 1.8x faster
CELLS = {50: 50 * 4 * 21, 500: 500 * 4 * 21}  # T * N * (2L + 1) at N = 4, L = 10


def _rows():
    rows = []
    for (name, T), t in MEDIAN_S.items():
        rows.append({"backend": name, "T": T, "N": 4, "C": 20, "L": 10, "cells": CELLS[T],
                     "status": "ok", "time_median_s": t, "time_min_s": t * 0.9,
                     "time_max_s": t * 1.2, "ratio_to_torch": t / MEDIAN_S["torch", T],
                     "ratio_min": 0.6, "ratio_max": 0.7})
    rows.append({"backend": "torch-cuda", "T": 50, "N": 4, "C": 20, "L": 10, "cells": 4200,
                 "status": "skipped", "reason": "no CUDA"})
    return rows


def _two_thread_counts():
    return _rows() + [{**r, "threads": 2, **{k: r[k] / 1.8 for k in TIMES}}
                      for r in _rows() if r["status"] == "ok"]


def _legend(ax) -> list[str]:
    legend = ax.get_legend()
    return [] if legend is None else [t.get_text() for t in legend.get_texts()]


def _bars(ax) -> dict[str, tuple]:
    """label -> (x, y) of each errorbar series."""
    return {c.get_label(): (list(c.lines[0].get_xdata()), list(c.lines[0].get_ydata()))
            for c in ax.containers}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    pyplot().close("all")


SIZE = "N=4 C=20 L=10"
FIGURES = [  # (file, x scale, y scale, legend, x label holds, y label holds)
    ("time_vs_cells.png", "log", "log", ["numpy", "torch"], "DP cells", "time per call (ms)"),
    ("ratio_to_torch.png", "log", "linear", ["numpy"], "time / torch time", ""),
    ("ns_per_cell_vs_T.png", "log", "log", [f"numpy {SIZE}", f"torch {SIZE}"], "T (frames)",
     "ns per DP cell"),
    ("thread_scaling.png", "linear", "log",
     [f"{b} T={T} {SIZE}" for b in ("numpy", "torch") for T in (50, 500)], "threads",
     "time per call (ms)"),
]


@pytest.mark.parametrize("name, xscale, yscale, legend, xlabel, ylabel", FIGURES,
                         ids=[f[0] for f in FIGURES])
def test_each_figure_is_one_panel_with_its_scales_labels_and_backends(name, xscale, yscale,
                                                                      legend, xlabel, ylabel):
    """One panel per figure, log where the docs say, labelled axes, a legend entry per ok
    backend (and size or thread group); torch has no ratio to itself, the skipped backend
    is nowhere."""
    fig = bench_figures(_two_thread_counts())[name]
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    assert (ax.get_xscale(), ax.get_yscale()) == (xscale, yscale)
    assert _legend(ax) == legend
    assert xlabel in ax.get_xlabel() and ylabel in ax.get_ylabel() and ax.get_title()


def test_time_vs_cells_points_are_median_ms_with_min_max_bars():
    """One point per size at T*N*S cells and the median in ms, its bar from min to max."""
    ax = bench_figures(_rows())["time_vs_cells.png"].axes[0]
    assert _bars(ax) == {"numpy": ([4200, 42000], pytest.approx([2.0, 20.0])),
                         "torch": ([4200, 42000], pytest.approx([3.0, 30.0]))}
    numpy = next(c for c in ax.containers if c.get_label() == "numpy")
    spans = [(s[0][1], s[1][1]) for s in numpy.lines[2][0].get_segments()]  # (y from, y to)
    assert spans == [pytest.approx((1.8, 2.4)), pytest.approx((18.0, 24.0))]


def test_ratio_to_torch_puts_each_size_on_its_own_labelled_row():
    """numpy at 2/3 of torch's time on both sizes, one row per size (smallest first), the
    dashed line at 1."""
    ax = bench_figures(_rows())["ratio_to_torch.png"].axes[0]
    assert _bars(ax) == {"numpy": (pytest.approx([2 / 3, 2 / 3]), [0, 1])}
    assert [t.get_text() for t in ax.get_yticklabels()] == ["T=50 N=4 C=20 L=10",
                                                            "T=500 N=4 C=20 L=10"]
    assert any(list(line.get_xdata()) == [1.0, 1.0] for line in ax.get_lines())


def test_ns_per_cell_is_the_median_over_the_dp_cells():
    """0.002 s over 4200 cells is 476.2 ns per cell, as is 0.02 s over 42000: a flat line."""
    ax = bench_figures(_rows())["ns_per_cell_vs_T.png"].axes[0]
    lines = {line.get_label(): (list(line.get_xdata()), list(line.get_ydata()))
             for line in ax.get_lines()}
    assert lines == {f"numpy {SIZE}": ([50, 500], pytest.approx([476.19, 476.19], rel=1e-4)),
                     f"torch {SIZE}": ([50, 500], pytest.approx([714.29, 714.29], rel=1e-4))}


def test_thread_scaling_draws_the_measured_and_the_ideal_line():
    """At 1 and 2 threads: the medians (2 ms, then 2 / 1.8 ms for numpy at T=50) and the
    ideal dashed line from one thread (2 ms, then 1 ms); ticks at the thread counts."""
    ax = bench_figures(_two_thread_counts())["thread_scaling.png"].axes[0]
    assert _bars(ax)[f"numpy T=50 {SIZE}"] == ([1, 2], pytest.approx([2.0, 2.0 / 1.8]))
    ideal = [list(line.get_ydata()) for line in ax.get_lines() if line.get_linestyle() == "--"]
    assert len(ideal) == 4 and pytest.approx([2.0, 1.0]) in ideal
    assert list(ax.get_xticks()) == [1, 2]


def test_plots_are_written_as_png_files(tmp_path):
    """bench_plots writes each figure as a PNG of 7 in x 110 dpi = 770 px width; the thread
    scaling one only with two thread counts."""
    paths = bench_plots(_rows(), tmp_path)
    assert [p.name for p in paths] == ["time_vs_cells.png", "ratio_to_torch.png",
                                       "ns_per_cell_vs_T.png"]
    (tmp_path / "two").mkdir()
    paths += bench_plots(_two_thread_counts(), tmp_path / "two")
    assert paths[-1].name == "thread_scaling.png"
    for p in paths:
        with Image.open(p) as image:
            assert image.format == "PNG" and image.width == 770 and image.height > 200, p


def test_plots_survive_a_run_where_nothing_ran(tmp_path):
    """With only skipped rows each figure is drawn with empty axes and no legend, not a crash."""
    skipped = [r for r in _rows() if r["status"] == "skipped"]
    for name, fig in bench_figures(skipped).items():
        ax = fig.axes[0]
        assert not ax.containers and not _legend(ax), name
    assert all(p.exists() for p in bench_plots(skipped, tmp_path))


def test_report_scaling_is_two_log_log_panels_with_a_line_per_backend():
    """The report's figure: time (ms) and ns per cell against cells, both log-log, one line
    per ok backend in each; as a data URI it is a PNG; None when nothing has a time."""
    rows = [{**r, "ns_per_cell": r["time_median_s"] / r["cells"] * 1e9}
            for r in _rows() if r["status"] == "ok"]
    fig = bench_scaling_figure(rows + [_rows()[-1]])
    assert len(fig.axes) == 2
    time, cost = fig.axes
    for ax in (time, cost):
        assert (ax.get_xscale(), ax.get_yscale()) == ("log", "log")
        assert _legend(ax) == ["numpy", "torch"] and "DP cells" in ax.get_xlabel()
    assert _bars(time)["numpy"] == ([4200, 42000], pytest.approx([2.0, 20.0]))
    numpy = next(line for line in cost.get_lines() if line.get_label() == "numpy")
    np.testing.assert_allclose(numpy.get_ydata(), [476.19, 476.19], rtol=1e-4)
    uri = bench_scaling(rows)
    assert uri.startswith("data:image/png;base64,")
    with Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))) as image:
        assert image.format == "PNG" and image.width > 500
    assert bench_scaling([_rows()[-1]]) is None
