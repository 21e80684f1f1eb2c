"""The compare heat map (ctcbench.compare.plot), margins.png of a run folder and the report's
copy: cases x backend:dtype, each cell log10(worst error / tolerance) worked out by hand, each
status's mark, whatever mix of statuses the rows hold."""
from __future__ import annotations

import base64
import io

import numpy as np
import pytest
from PIL import Image

from ctcbench.compare.page import compare_margins
from ctcbench.compare.plot import margins_figure, plot_margins
from ctcbench.compare.table import tidy
from ctcbench.plotting import pyplot

NAN = np.nan


def _row(backend, case, dtype, status, margin=None, family="f"):
    return {"backend": backend, "case": case, "family": family, "dtype": dtype,
            "status": status, "margin": margin}


REPORT_ROWS = [  # × mismatch, C crashed, T timeout, k known, E error, u unsupported
    _row("a", "c_ok", "float64", "ok", 0.01),  # -2
    _row("a", "c_mis", "float64", "mismatch", 100.0),  # 2
    _row("a", "c_known", "float64", "known", 10.0),  # 1
    _row("a", "c_crash", "float64", "crashed"),
    _row("a", "c_time", "float64", "timeout"),
    _row("a", "c_err", "float64", "error"),
    _row("a", "c_uns", "float64", "unsupported"),
    _row("b", "c_ok", "float32", "ok", 1e-9),  # -9, shown as -8
    _row("b", "c_mis", "float32", "mismatch", np.inf),  # drawn as 3, shown as 2
    {"backend": "c", "case": "*", "dtype": "*", "status": "skipped"},
]
REPORT_CASES = ["c_crash", "c_err", "c_known", "c_mis", "c_ok", "c_time", "c_uns"]
CELLS = {("c_ok", "a:float64"): -2, ("c_mis", "a:float64"): 2, ("c_known", "a:float64"): 1,
         ("c_ok", "b:float32"): -8, ("c_mis", "b:float32"): 2}
MARKED = {("c_mis", "a:float64"): "×", ("c_mis", "b:float32"): "×", ("c_known", "a:float64"): "k",
          ("c_crash", "a:float64"): "C", ("c_time", "a:float64"): "T",
          ("c_err", "a:float64"): "E", ("c_uns", "a:float64"): "u"}


@pytest.fixture(autouse=True)
def close_figures():
    yield
    pyplot().close("all")


def test_heat_map_cells_and_marks():
    """One heat map and its colour bar; a column per backend:dtype that ran (not the skipped
    one), a row per case; each cell log10(margin) clipped to [-8, 2], blank (NaN) where the
    backend gave no margin; the status marks on their cells."""
    columns, cases, values, marks = ["a:float64", "b:float32"], REPORT_CASES, CELLS, MARKED
    fig = margins_figure(REPORT_ROWS)
    assert len(fig.axes) == 2  # the map and its colour bar
    ax, bar = fig.axes
    assert [t.get_text() for t in ax.get_xticklabels()] == columns
    assert [t.get_text() for t in ax.get_yticklabels()] == cases
    expected = np.full((len(cases), len(columns)), NAN)
    for (case, column), value in values.items():
        expected[cases.index(case), columns.index(column)] = value
    shown = np.ma.filled(ax.images[0].get_array().astype(float), NAN)
    np.testing.assert_allclose(shown, expected, atol=1e-12)
    assert {(cases[round(t.get_position()[1])], columns[round(t.get_position()[0])]): t.get_text()
            for t in ax.texts} == marks
    assert "log10(error / tolerance)" in bar.get_ylabel()


def test_run_folder_heat_map_is_a_png(tmp_path):
    """plot_margins writes that figure as a PNG file."""
    path = plot_margins(tidy(REPORT_ROWS), tmp_path / "m.png")
    with Image.open(path) as image:
        assert image.format == "PNG" and image.width > 200 and image.height > 100


def test_report_heat_map_is_a_png_uri_and_none_without_cases():
    """The report gets the figure as a PNG data URI, and nothing when only per-backend rows
    (case "*") exist."""
    uri = compare_margins(REPORT_ROWS)
    assert uri.startswith("data:image/png;base64,")
    with Image.open(io.BytesIO(base64.b64decode(uri.split(",", 1)[1]))) as image:
        assert image.format == "PNG" and image.width > 200
    assert compare_margins([REPORT_ROWS[-1]]) is None


def test_report_copies_the_run_folders_png_only_while_it_is_fresh(tmp_path):
    """The report embeds margins.png drawn after the last row (the same picture it would
    draw); once a row is written after it (a resume without --plot), the report draws the map
    again from the rows it is given."""
    import os
    png = plot_margins(tidy(REPORT_ROWS), tmp_path / "margins.png")
    log = tmp_path / "rows.jsonl"
    log.write_text("")
    os.utime(log, (png.stat().st_mtime - 10,) * 2)
    fresh = compare_margins(REPORT_ROWS, tmp_path)
    assert fresh == compare_margins(REPORT_ROWS)  # the file is what the report would draw
    assert compare_margins(REPORT_ROWS[:3], tmp_path) == fresh  # the file, not these rows
    os.utime(log, (png.stat().st_mtime + 10,) * 2)
    assert compare_margins(REPORT_ROWS[:3], tmp_path) == compare_margins(REPORT_ROWS[:3]) != fresh
