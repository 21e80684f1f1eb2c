"""Several training runs side by side: a grid of optimizers x learning rates x seeds x models,
run in parallel worker processes (one torch thread each), collected into one table.

Folder layout (``reports/convergence-<stamp>/``)::

  meta.json          grid, base config and environment
  runs/<name>/       one folder per run (see ctcbench.convergence.train)
  summary.csv/.json  one row per run
  curves.csv         every run's per-eval rows, with the run's name
  optimizers.csv     per optimizer: best learning rate and the spread over seeds at it
  convergence.png    loss, CER and blank fraction vs step
"""
from __future__ import annotations

import itertools
import json
import multiprocessing as mp
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

from ctcbench.convergence.ctc import ctc_loss_fn
from ctcbench.convergence.data import load_pool
from ctcbench.convergence.datacache import check_cache_dir
from ctcbench.convergence.train import CURVE_FLOATS, TrainConfig, check_fits, train_run
from ctcbench.runstore import RowLog, new_run_dir, to_json, write_meta

EXTRA_PACKAGES = ("pillow", "captcha", "scikit-learn", "matplotlib")


@dataclass
class Grid:
    optimizers: tuple[str, ...] = ("rmsprop",)
    lrs: tuple[float, ...] = (1e-3,)
    seeds: tuple[int, ...] = (0,)
    models: tuple[str, ...] = ("crnn",)

    def configs(self, base: TrainConfig) -> list[tuple[str, TrainConfig]]:
        out = []
        for opt, lr, model, seed in itertools.product(self.optimizers, self.lrs, self.models, self.seeds):
            cfg = replace(base, optimizer=opt, lr=lr, seed=seed,
                          model=replace(base.model, name=model), data=replace(base.data))
            name = f"{model}-{opt}-lr{lr:g}-s{seed}"
            if any(name == n for n, _ in out):  # two runs would share one run folder
                raise ValueError(f"lr: expected rates that differ in 6 significant digits, "
                                 f"got {', '.join(repr(v) for v in self.lrs)}")
            out.append((name, cfg.check()))
        return out


def _worker(name, cfg, run_dir, cache_dir, resume, queue):
    progress = (lambda n: queue.put(n)) if queue is not None else None
    return name, train_run(cfg, run_dir, cache_dir=cache_dir, resume=resume, progress=progress)


def run_grid(base: TrainConfig, grid: Grid, *, out=None, resume: bool = False, jobs: int | None = None,
             cache_dir=None, show_progress: bool = True) -> tuple[Path, pd.DataFrame]:
    """Run every configuration of ``grid`` over ``base``; returns (run folder, summary table).

    With ``resume`` and an existing ``out``, the stored base config and grid are used, finished
    runs are kept and unfinished ones continue from their last checkpoint.
    """
    if resume:
        if out is None or not (Path(out) / "meta.json").exists():
            raise FileNotFoundError(f"resume: expected a convergence run folder with meta.json, got {out!r}")
        try:
            stored = json.loads((Path(out) / "meta.json").read_text())["config"]
            base = TrainConfig.from_dict(stored["base"])
            grid = Grid(**{k: tuple(v) for k, v in stored["grid"].items()})
        except (ValueError, KeyError, TypeError, AttributeError):  # another command's folder
            raise ValueError(f"resume: expected a convergence run folder, got {str(out)!r} (its "
                             f"meta.json holds no convergence grid)") from None
        cache_dir = stored.get("cache_dir", cache_dir)
    configs = grid.configs(base)
    for model_name in grid.models:  # before any data is rendered
        check_fits(replace(base, model=replace(base.model, name=model_name)).check())
    check_cache_dir(cache_dir)  # before any run folder is written
    run_dir = new_run_dir("convergence", out)
    if not resume:
        write_meta(run_dir, {"base": asdict(base), "grid": asdict(grid),
                             "cache_dir": None if cache_dir is None else str(cache_dir)},
                   extra_packages=EXTRA_PACKAGES)
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs: expected >= 1, got {jobs}")
    jobs = jobs or min(2, os.cpu_count() or 1)
    try:  # an unknown --ctc-backend fails here, before any data is rendered
        ctc_loss_fn(base.ctc_backend, reduction=base.reduction)
    except KeyError as exc:
        raise ValueError(f"ctc-backend: {exc.args[0]}") from None
    # Render the data once here; workers then read it from the cache.
    for split in ("train", "test"):
        load_pool(base.data, split, cache_dir=cache_dir, progress=show_progress)

    total = sum(cfg.steps for _, cfg in configs)
    bar = None
    if show_progress:
        from ctcbench.progress import Progress
        bar = Progress(f"convergence ({len(configs)} runs)", total=total, unit="steps")
    summaries = {}
    if jobs == 1 or len(configs) == 1:
        for name, cfg in configs:
            summaries[name] = train_run(cfg, run_dir / "runs" / name, cache_dir=cache_dir,
                                        resume=resume, progress=bar.update if bar else None)
    else:
        ctx = mp.get_context("spawn")  # fresh interpreters: no forked torch thread pools
        with ctx.Manager() as manager, ProcessPoolExecutor(jobs, mp_context=ctx) as pool:
            queue = manager.Queue() if bar else None
            futures = [pool.submit(_worker, name, cfg, run_dir / "runs" / name, cache_dir, resume, queue)
                       for name, cfg in configs]
            pending = set(futures)
            while pending:
                done = {f for f in pending if f.done()}
                pending -= done
                for f in done:
                    name, summary = f.result()
                    summaries[name] = summary
                while queue is not None and not queue.empty():
                    bar.update(queue.get())
                if pending:
                    time.sleep(0.2)
    if bar:
        bar.close()
    summary = pd.DataFrame([summaries[name] for name, _ in configs])
    export(run_dir, [name for name, _ in configs], summary)
    from ctcbench.report import write_report
    write_report([run_dir])  # report.html: the run folder as one page
    return run_dir, summary


def load_curves(run_dir: Path, names) -> pd.DataFrame:
    frames = []
    for name in names:
        rows = RowLog(run_dir / "runs" / name / "curve.jsonl").rows(floats=CURVE_FLOATS)
        cfg = json.loads((run_dir / "runs" / name / "config.json").read_text())
        df = pd.DataFrame(rows)
        df.insert(0, "run", name)
        for k in ("optimizer", "lr", "seed"):
            df[k] = cfg[k]
        df["model"] = cfg["model"]["name"]
        frames.append(df)
    curves = pd.concat(frames, ignore_index=True)
    for col in CURVE_FLOATS:  # a diverged run's NaN must stay numeric (plots, medians)
        curves[col] = pd.to_numeric(curves[col], errors="coerce")
    return curves


def optimizer_table(summary: pd.DataFrame) -> pd.DataFrame:
    """Per (model, optimizer): the best learning rate (lowest median final CER over seeds,
    ties broken by median steps to CER < 10%) and the spread over seeds at that rate."""
    rows = []
    for (model, opt), g in summary.groupby(["model", "optimizer"], sort=False):
        per_lr = g.groupby("lr").agg(med_cer=("final_cer", "median"),
                                     med_steps=("steps_to_cer10", lambda s: s.fillna(float("inf")).median()))
        best_lr = per_lr.sort_values(["med_cer", "med_steps"]).index[0]
        b = g[g["lr"] == best_lr]
        reached = b["steps_to_cer10"].notna()
        rows.append({
            "model": model, "optimizer": opt, "best_lr": best_lr, "seeds": len(b),
            "reached_cer10": f"{int(reached.sum())}/{len(b)}",
            "plateau_end_median": b["plateau_end_step"].median(),
            "plateau_end_range": _range(b["plateau_end_step"]),
            "steps_to_cer10_median": b["steps_to_cer10"].median() if reached.all() else None,
            "steps_to_cer10_range": _range(b["steps_to_cer10"]),
            "final_cer_median": b["final_cer"].median(),
            "final_cer_range": f"{b['final_cer'].min():.3f}-{b['final_cer'].max():.3f}",
        })
    return pd.DataFrame(rows)


def _range(s: pd.Series) -> str:
    """'min-max' over seeds; a censored (never reached) seed shows as '>steps'."""
    vals = [("never" if pd.isna(v) else str(int(v))) for v in s]
    reached = [int(v) for v in s if not pd.isna(v)]
    if not reached:
        return "never"
    text = f"{min(reached)}-{max(reached)}" if len(set(reached)) > 1 else str(reached[0])
    return text + (f" (+{vals.count('never')} never)" if "never" in vals else "")


def export(run_dir: Path, names, summary: pd.DataFrame) -> None:
    from ctcbench.convergence.plots import plot_curves
    from ctcbench.convergence.tables import records, to_csv  # never reached: empty / null
    to_csv(summary, run_dir / "summary.csv")
    (run_dir / "summary.json").write_text(to_json(records(summary), indent=2) + "\n")
    curves = load_curves(run_dir, names)
    curves.to_csv(run_dir / "curves.csv", index=False)
    to_csv(optimizer_table(summary), run_dir / "optimizers.csv")
    plot_curves(curves, run_dir / "convergence.png")
