"""The convergence page's figure: what its docstring promises, read from the figure."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ctcbench.convergence.page import convergence_bands, convergence_bands_figure


def curves() -> pd.DataFrame:
    """Two groups: 'a' over seeds 0 and 1 (CER 0.9 and 0.5 at step 20), 'b' over one seed."""
    rows = []
    for group, seed, cer in (("a", 0, 0.9), ("a", 1, 0.5), ("b", 0, 0.2)):
        for step in (0, 10, 20):
            rows.append({"group": group, "seed": seed, "step": step, "test_loss": 10.0 - step / 4,
                         "cer": 1.0 if step < 20 else cer, "blank_frac": 0.5,
                         "grad_norm": 1.0 + step})
    return pd.DataFrame(rows)


def test_four_panels_median_lines_bands_and_plateau_ends():
    fig = convergence_bands_figure(curves(), {"a": [10]})
    axes = fig.axes
    assert [ax.get_title() for ax in axes] == ["held-out CTC loss", "held-out CER (greedy)",
                                              "frames whose argmax is blank", "gradient norm"]
    assert [ax.get_yscale() for ax in axes] == ["log", "linear", "linear", "log"]
    cer = axes[1]
    lines = {ln.get_label(): ln for ln in cer.get_lines() if not ln.get_label().startswith("_")}
    assert set(lines) == {"a", "b"}
    np.testing.assert_allclose(lines["a"].get_ydata(), [1.0, 1.0, 0.7])  # median of 0.9, 0.5
    np.testing.assert_allclose(lines["b"].get_ydata(), [1.0, 1.0, 0.2])
    assert len(cer.collections) == 1  # the min-max band: only 'a' has two seeds
    vertical = [ln for ln in cer.get_lines() if ln.get_linestyle() == ":"
                and len(set(ln.get_xdata())) == 1]
    assert [ln.get_xdata()[0] for ln in vertical] == [10]  # a's plateau end


def test_no_curves_no_picture():
    assert convergence_bands(None, {}) is None
    assert convergence_bands(pd.DataFrame(), {}) is None
    assert convergence_bands(curves(), {}).startswith("data:image/png;base64,")
