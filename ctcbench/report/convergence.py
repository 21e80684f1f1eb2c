"""A convergence grid folder as report context: curves per optimizer with seed bands
(median, min-max) and plateau ends marked, one row per run, the optimizer table, and
relative links to the checkpoints. Reads ``runs/*/`` so an interrupted grid reports too."""
from __future__ import annotations

import json
import os
from pathlib import Path

import pandas as pd

SUMMARY_COLUMNS = ("run", "model", "optimizer", "lr", "seed", "steps", "plateau_end_step",
                   "steps_to_cer10", "steps_to_cer02", "final_cer", "final_seq_acc",
                   "final_test_loss", "final_blank_frac", "wall_s")


def group_label(model, optimizer, lr) -> str:
    """The seeds of one (model, optimizer, lr) share a colour and a band."""
    return f"{model} {optimizer} lr={float(lr):g}"


def _run(folder: Path) -> tuple[dict, pd.DataFrame] | None:
    """(summary row, curve) of one run folder; None when it has not logged an eval yet."""
    from ctcbench.convergence.train import CURVE_FLOATS, summarize
    from ctcbench.runs.store import RowLog
    rows = RowLog(folder / "curve.jsonl").rows(floats=CURVE_FLOATS)
    if not rows or not (folder / "config.json").is_file():
        return None
    cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    finished = (folder / "summary.json").is_file()
    row = (json.loads((folder / "summary.json").read_text(encoding="utf-8")) if finished
           else summarize(rows))
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


def convergence_context(run_dir: Path, meta: dict, link_base: Path) -> dict:
    from ctcbench.convergence.grid import optimizer_table
    from ctcbench.report.figures import convergence_bands
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
