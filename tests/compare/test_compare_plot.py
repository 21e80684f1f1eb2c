"""The compare heat map: one PNG from tidy rows, whatever mix of statuses they hold."""
from __future__ import annotations

import numpy as np

from ctcbench.compare.table import tidy
from ctcbench.compare.plot import plot_margins


def test_plot_margins_writes_png_for_every_status(tmp_path):
    """ok, mismatch (incl. an infinite margin), unsupported, error and skipped rows all plot."""
    rows = [
        {"backend": "a", "case": "c1", "family": "f", "dtype": "float32", "status": "ok",
         "margin": 1e-3},
        {"backend": "a", "case": "c2", "family": "f", "dtype": "float32", "status": "mismatch",
         "margin": np.inf},
        {"backend": "b", "case": "c1", "family": "f", "dtype": "float64", "status": "unsupported"},
        {"backend": "b", "case": "c2", "family": "g", "dtype": "float64", "status": "error"},
        {"backend": "c", "case": "*", "dtype": "*", "status": "skipped"},
    ]
    path = plot_margins(tidy(rows), tmp_path / "m.png")
    data = path.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000
