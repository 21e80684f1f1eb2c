"""Several training runs side by side: a grid of optimizers x learning rates x seeds x models,
run in parallel worker processes or on a Dask cluster (one torch thread each), collected into one table.

Folder layout (``reports/convergence-<stamp>/``)::

  meta.json          kind, row format, grid, base config and environment
  rows.jsonl         one summary row per finished run, appended as each one finishes
  runs/<name>/       one folder per run (see ctcbench.convergence.train)
  summary.csv/.json  one row per run
  curves.csv         every run's per-eval rows, with the run's name
  optimizers.csv     per optimizer: best learning rate and the spread over seeds at it
  verdicts.json      per optimizer at its best rate, with bootstrap intervals (see verdicts.py)
  convergence.png    loss, CER and blank fraction vs step
"""
from __future__ import annotations

import itertools
import os
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import pandas as pd

from ctcbench.errors import UnknownName, fail
from ctcbench.convergence.ctc import ctc_loss_fn
from ctcbench.convergence.data import load_pool
from ctcbench.convergence.datacache import check_cache_dir
from ctcbench.convergence.executors import LocalPool, RunTask
from ctcbench.convergence.curve import CURVE_FLOATS
from ctcbench.convergence.train import check_fits
from ctcbench.convergence.trainconfig import TrainConfig
from ctcbench.convergence.verdicts import write_verdicts
from ctcbench.convergence.kind import KIND, SUMMARY_FLOATS
from ctcbench.runs.kinds import read_object
from ctcbench.runs.store import RowLog, RunResult, check_out, open_run
from ctcbench.files import to_json

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


def _checked(base: TrainConfig, grid: Grid) -> list[tuple[str, TrainConfig]]:
    """The grid's (name, config) pairs, every one checked before any data is rendered."""
    configs = grid.configs(base)
    for model_name in grid.models:
        check_fits(replace(base, model=replace(base.model, name=model_name)).check())
    try:  # an unknown --ctc-backend fails here, before any data is rendered
        ctc_loss_fn(base.ctc_backend, reduction=base.reduction)
    except UnknownName as exc:
        raise ValueError(exc.named("ctc-backend")) from None
    return configs


def _stored(run) -> tuple[TrainConfig, Grid, dict]:
    """The base config, grid and whole config a convergence run folder's meta.json holds."""
    try:
        stored = run.meta["config"]
        base = TrainConfig.from_dict(stored["base"])
        grid = Grid(**{k: tuple(v) for k, v in stored["grid"].items()})
    except (ValueError, KeyError, TypeError, AttributeError):
        raise ValueError(f"--resume: expected a convergence run folder, got "
                         f"{str(run.run_dir)!r} (its meta.json holds no convergence grid)") from None
    return base, grid, stored


def run_grid(base: TrainConfig, grid: Grid, *, out=None, resume: bool = False, jobs: int | None = None,
             cache_dir=None, show_progress: bool = True, executor=None) -> RunResult:
    """Run every configuration of ``grid`` over ``base``; one summary row per training run.

    ``out``: run folder (default ``reports/convergence-<UTC time>``); one that already holds a
    run is refused unless ``resume``, which uses the base config and grid stored in its
    meta.json (``{"config": {"base", "grid", "cache_dir"}, ...}``), keeps finished runs and
    continues unfinished ones from their last checkpoint. Each finished run's summary row is
    appended to ``rows.jsonl``. Returns a ``RunResult`` whose ``rows`` are those summaries.
    """
    check_out(KIND, out, resume=resume)
    if jobs is not None and jobs < 1:
        raise ValueError(f"jobs: expected >= 1, got {jobs}")
    jobs = jobs or min(2, os.cpu_count() or 1)
    configs = None if resume else _checked(base, grid)  # a bad option makes no folder
    if not resume:
        check_cache_dir(cache_dir)
    with open_run(KIND, out, resume=resume) as run:
        if resume:
            base, grid, stored = _stored(run)
            cache_dir = stored.get("cache_dir", cache_dir)
            check_cache_dir(cache_dir)
            configs = _checked(base, grid)
            run.environment = run.meta.get("environment", {})
        else:
            run.write_meta({"base": asdict(base), "grid": asdict(grid),
                            "cache_dir": None if cache_dir is None else str(cache_dir)},
                           extra_packages=EXTRA_PACKAGES)
        kept = {r.get("run"): r for r in run.log.rows(floats=SUMMARY_FLOATS)}
        summaries = _train_all(run, [(n, c) for n, c in configs if n not in kept], base,
                               total=sum(c.steps for _, c in configs),
                               done_steps=sum(c.steps for n, c in configs if n in kept),
                               jobs=jobs, cache_dir=cache_dir, resume=resume,
                               show_progress=show_progress, executor=executor)
        rows = pd.DataFrame([kept.get(name) or summaries[name] for name, _ in configs])
        export(run.run_dir, [name for name, _ in configs], rows)
    resumed = sum(name in kept for name, _ in configs)
    summary = {"failed": False, "runs": len(configs), "resumed_runs": resumed,
               "run_dir": str(run.run_dir)}
    return RunResult(run.run_dir, rows, summary, run.environment, resumed=resumed,
                     files=[run.run_dir / f for f in ("summary.csv", "summary.json", "curves.csv",
                                                      "optimizers.csv", "convergence.png")])


def _train_all(run, configs, base, *, total, done_steps, jobs, cache_dir, resume,
               show_progress, executor=None) -> dict:
    """Train each (name, config) into ``run``, appending each summary row as it finishes."""
    # Render the data once here; workers then read it from the cache.
    for split in ("train", "test"):
        load_pool(base.data, split, cache_dir=cache_dir, progress=show_progress)
    bar = None
    if show_progress:
        from ctcbench.progress import Progress
        bar = Progress(f"convergence ({len(configs)} runs)", total=total, unit="steps")
        bar.update(done_steps)
    summaries = {}

    def finished(name, summary):
        summaries[name] = summary
        run.log.append(summary)

    executor = executor or LocalPool(jobs)
    tasks = [RunTask(name, cfg, run.run_dir / "runs" / name, cache_dir, resume)
             for name, cfg in configs]
    executor.run(tasks, progress=bar.update if bar else None, finished=finished)
    if bar:
        bar.close()
    return summaries


def load_curves(run_dir: Path, names) -> pd.DataFrame:
    frames = []
    for name in names:
        path = run_dir / "runs" / name / "curve.jsonl"
        rows = RowLog(path).rows(floats=CURVE_FLOATS)
        if not rows:  # a finished run's curve emptied: nothing to plot or tabulate
            fail(str(path), f"the curve of the finished run {name!r}", "no rows")
        cfg = read_object(run_dir / "runs" / name / "config.json", "a training run's config",
                          keys=("optimizer", "lr", "seed", "model"))
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
    write_verdicts(run_dir, summary)
    plot_curves(curves, run_dir / "convergence.png")
