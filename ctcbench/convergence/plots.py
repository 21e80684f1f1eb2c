"""Convergence plots: held-out loss, CER, blank fraction and gradient norm vs step.

One colour per (model, optimizer, lr) group; each seed is a thin line and the min-max band
over seeds is shaded, so a single lucky or unlucky seed is visible as such.
"""
from __future__ import annotations

from pathlib import Path

import pandas as pd

PANELS = (("test_loss", "held-out CTC loss"), ("cer", "held-out CER (greedy)"),
          ("blank_frac", "fraction of frames argmax = blank"), ("grad_norm", "gradient norm"))


def _group_label(g: pd.DataFrame, by, keys) -> str:
    keys = keys if isinstance(keys, tuple) else (keys,)
    parts = [f"lr={v:g}" if col == "lr" else str(v) for col, v in zip(by, keys)]
    n = g["seed"].nunique()
    return f"{' '.join(parts)} ({n} seed{'s' if n > 1 else ''})"


def plot_curves(curves: pd.DataFrame, path: str | Path, *,
                by=("model", "optimizer", "lr")) -> Path:
    """Write a 2x2 PNG of the curves, one colour per ``by`` group; returns the path."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(12, 8), sharex=True)
    groups = list(curves.groupby(list(by), sort=False))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax, (col, title) in zip(axes.flat, PANELS):
        for i, (keys, g) in enumerate(groups):
            color = colors[i % len(colors)]
            wide = g.pivot_table(index="step", columns="seed", values=col)  # (steps, seeds)
            for seed in wide.columns:
                ax.plot(wide.index, wide[seed], color=color, lw=0.9, alpha=0.8)
            if wide.shape[1] > 1:
                ax.fill_between(wide.index, wide.min(axis=1), wide.max(axis=1), color=color,
                                alpha=0.18, lw=0)
            ax.plot([], [], color=color, label=_group_label(g, by, keys))
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if col in ("test_loss", "grad_norm"):
            ax.set_yscale("log")
        if col in ("cer", "blank_frac"):
            ax.set_ylim(-0.02, 1.05)
    for ax in axes[1]:
        ax.set_xlabel("training step")
    axes[0, 1].axhline(0.10, color="gray", ls=":", lw=0.8)
    axes[0, 1].axhline(0.02, color="gray", ls=":", lw=0.8)
    axes[0, 0].legend(fontsize=8, loc="upper right")
    fig.suptitle("CTC convergence: thin lines = seeds, shaded = min-max over seeds")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path
