"""A convergence grid folder as report context: curves per optimizer with seed bands
(median, min-max) and plateau ends marked, one row per run, the optimizer table, and
relative links to the checkpoints. Reads ``runs/*/`` so an interrupted grid reports too."""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ctcbench.plotting import plain_log, png_uri, pyplot

SUMMARY_COLUMNS = ("run", "model", "optimizer", "lr", "seed", "steps", "plateau_end_step",
                   "steps_to_cer10", "steps_to_cer02", "final_cer", "final_seq_acc",
                   "final_test_loss", "final_blank_frac", "wall_s")


def group_label(model, optimizer, lr) -> str:
    """The seeds of one (model, optimizer, lr) share a colour and a band."""
    return f"{model} {optimizer} lr={float(lr):g}"


def _run(folder: Path) -> tuple[dict, pd.DataFrame] | None:
    """(summary row, curve) of one run folder; None when it has not logged an eval yet."""
    from ctcbench.convergence.train import CURVE_FLOATS, summarize
    from ctcbench.convergence.kind import SUMMARY_FLOATS
    from ctcbench.errors import fail
    from ctcbench.runs.kinds import read_object
    from ctcbench.runs.store import RowLog
    rows = RowLog(folder / "curve.jsonl").rows(floats=CURVE_FLOATS)
    if not rows or not (folder / "config.json").is_file():
        return None
    cfg = read_object(folder / "config.json", "a training run's config")
    finished = (folder / "summary.json").is_file()
    row = (read_object(folder / "summary.json", "a training run's summary",
                       keys=tuple(summarize(rows))) if finished else summarize(rows))
    for key in SUMMARY_FLOATS:  # "nan"/"inf" as to_json spells them, or null
        value = row.get(key)
        if isinstance(value, bool) or not (value is None or isinstance(value, (int, float))
                                           or value in ("inf", "-inf", "nan")):
            fail(f"{folder / 'summary.json'}: {key}", "a number or null", repr(value)[:60])
    row.update(run=folder.name, optimizer=cfg.get("optimizer"), lr=cfg.get("lr"),
               seed=cfg.get("seed"), model=(cfg.get("model") or {}).get("name"),
               finished=finished)
    curve = pd.DataFrame(rows)
    for col in CURVE_FLOATS:
        if col in curve:  # a diverged run's "nan" must stay numeric
            curve[col] = pd.to_numeric(curve[col], errors="coerce")
    curve["seed"] = row["seed"]
    curve["group"] = group_label(row["model"], row["optimizer"], row["lr"])
    return row, curve


def context(run_dir: Path, meta: dict, link_base: Path) -> dict:
    """The convergence page of ``run_dir``."""
    from ctcbench.convergence.grid import optimizer_table
    run_dir = Path(run_dir)
    runs, curves = [], []
    for folder in sorted(p for p in (run_dir / "runs").glob("*") if p.is_dir()):
        loaded = _run(folder)
        if loaded is None:
            continue
        row, curve = loaded
        ckpt = folder / "checkpoint.pt"
        row["checkpoint_href"] = (Path(os.path.relpath(ckpt, link_base)).as_posix()
                                  if ckpt.is_file() else None)
        runs.append(row)
        curves.append(curve)
    summary = pd.DataFrame(runs)
    table = (optimizer_table(summary).to_dict("records")
             if not summary.empty and summary["final_cer"].notna().any() else [])
    plateau_ends: dict[str, list] = {}
    for row in runs:
        if row.get("plateau_end_step") is not None:
            label = group_label(row["model"], row["optimizer"], row["lr"])
            plateau_ends.setdefault(label, []).append(row["plateau_end_step"])
    curves_df = pd.concat(curves, ignore_index=True) if curves else None
    base = (meta.get("config") or {}).get("base") or {}
    settings = {k: base[k] for k in ("steps", "batch_size", "eval_every", "reduction",
                                     "ctc_backend") if k in base}
    data = base.get("data") or {}
    settings.update({f"data {k}": data[k] for k in ("kind", "charset", "train_size", "test_size")
                     if k in data})
    return {"runs": runs, "optimizers": table, "settings": settings,
            "plot": convergence_bands(curves_df, plateau_ends),
            "unfinished": [r["run"] for r in runs if not r["finished"]]}


PANELS = (("test_loss", "held-out CTC loss", True), ("cer", "held-out CER (greedy)", False),
          ("blank_frac", "frames whose argmax is blank", False),
          ("grad_norm", "gradient norm", True))


def convergence_bands(curves, plateau_ends: dict) -> str | None:
    """:func:`convergence_bands_figure` as a PNG data URI; None without curves."""
    fig = convergence_bands_figure(curves, plateau_ends)
    return None if fig is None else png_uri(fig)


def convergence_bands_figure(curves, plateau_ends: dict):
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
            plain_log(ax.yaxis)
        if col in ("cer", "blank_frac"):
            ax.set_ylim(-0.02, 1.05)
    for ax in axes[1]:
        ax.set_xlabel("training step")
    axes[0, 0].plot([], [], color="grey", ls=":", label="plateau end (one line per seed)")
    axes[0, 0].legend(fontsize=8, frameon=False)
    fig.tight_layout()
    return fig
