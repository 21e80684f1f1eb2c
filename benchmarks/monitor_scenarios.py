"""ctcbench.Monitor on the seed scenarios' baseline runs: the step it first reports on, and
what it reports on the healthy runs (nothing expected). docs/doctor.md records a run of it.

Not part of the test suite (minutes of training). Run with:

    python benchmarks/monitor_scenarios.py repeatvec captcha-stall line-labs [--steps N]
        [--seeds 0] [--lrs 1e-3] [--models crnn] [--arm baseline]
        [--out reports/monitor-scenarios]

Each run is the scenario's baseline config, trained by an explicit loop as a user would write
it (the convergence driver's loop without its evaluation): the monitor sees the training
batch's log-probs, its loss and the gradient norm after backward, before clipping.
"""
from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

import ctcbench
from ctcbench.convergence.batches import batch_indices, tensors
from ctcbench.convergence.runconfig import build
from ctcbench.convergence.ctc import ctc_loss_fn
from ctcbench.convergence.data import load_pool
from ctcbench.convergence.scenarios import SCENARIOS, arm_values
from ctcbench.convergence.train import _fresh, _sync_model_config


def monitored_run(cfg, out: Path, cache_dir: str) -> dict:
    """Train ``cfg`` with a Monitor watching; returns the events and the wall time."""
    cfg = cfg.check()
    _sync_model_config(cfg)
    torch.set_num_threads(cfg.threads)
    train = load_pool(cfg.data, "train", cache_dir=cache_dir)
    model, opt, sched = _fresh(cfg)
    loss_fn = ctc_loss_fn(cfg.ctc_backend, reduction=cfg.reduction)
    monitor = ctcbench.Monitor(out, reduction="sum" if cfg.reduction == "per-line"
                               else cfg.reduction, report=print)
    params = list(model.parameters())
    losses = []  # the training loss of every step, written beside the batches
    start = time.perf_counter()
    for step in range(cfg.steps):
        idx = batch_indices(cfg.seed, step, len(train), cfg.batch_size)
        x, targets, lengths = tensors(train, idx)  # (N, 1, H, W), (N, L), (N,)
        logits = model(x)  # (T, N, C)
        input_lengths = torch.full((logits.shape[1],), logits.shape[0], dtype=torch.long)
        loss = loss_fn(logits, targets, input_lengths, lengths)
        losses.append(float(loss.detach()))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        monitor.step(loss, logits.detach().log_softmax(-1), targets, input_lengths, lengths,
                     model=model, step=step)
        if cfg.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, cfg.clip)
        opt.step()
        sched.step()
    out.mkdir(parents=True, exist_ok=True)
    (out / "losses.json").write_text(json.dumps(losses))
    (out / "looks.json").write_text(json.dumps(monitor.looks))
    return {"events": [(e.step, e.kind) for e in monitor.events],
            "plateau": plateau_exit(losses, monitor.looks),
            "wall_s": round(time.perf_counter() - start, 1)}


def plateau_exit(losses: list, looks: list, after: int = 100) -> dict | None:
    """Where the blank plateau ended and how far the loss was below its level then and
    ``after`` steps later (docs/doctor.md's table for ``loss-stall``): the loss averaged over
    the 50 steps up to a look; the level, its median at the looks that found the plateau;
    the end, the first look without it after the last one with it. None if no look found it."""
    def recent(step):
        return sum(losses[max(0, step - 49):step + 1]) / len(losses[max(0, step - 49):step + 1])
    levels, end = [], None
    for step, codes in looks:
        if {"blank-collapse", "time-invariant"} & set(codes):
            levels.append(recent(step))
            end = None
        elif levels and end is None:
            end = step
    if not levels:
        return None
    level = statistics.median(levels)
    below = {k: round(100 * (1 - recent(min(s, len(losses) - 1)) / level))
             for k, s in (("pct_below_at_end", end), ("pct_below_later", (end or 0) + after))
             if end is not None}
    return {"level": round(level, 2), "end": end, **below}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenarios", nargs="+", choices=sorted(SCENARIOS))
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--seeds", default="0")
    parser.add_argument("--lrs", default=None, help="learning rates (default: the scenario's)")
    parser.add_argument("--models", default=None, help="models (default: the scenario's)")
    parser.add_argument("--arm", default="baseline", help="the scenario's arm (captcha-stall: "
                        "no-batchnorm, batch64, ...)")
    parser.add_argument("--out", default="reports/monitor-scenarios")
    parser.add_argument("--cache-dir", default="reports/.data-cache")
    args = parser.parse_args()
    given = {"seed": tuple(int(s) for s in args.seeds.split(","))}
    if args.steps:
        given["steps"] = args.steps
    if args.lrs:
        given["lr"] = tuple(float(v) for v in args.lrs.split(","))
    if args.models:
        given["model.name"] = tuple(args.models.split(","))
    results = {}
    for name in args.scenarios:
        base, grid = build(arm_values(SCENARIOS[name], args.arm, given))
        for run, cfg in grid.configs(base):
            print(f"{name} {run}: {cfg.steps} steps")
            results[f"{name}/{args.arm}/{run}"] = monitored_run(
                cfg, Path(args.out) / name / args.arm / run, args.cache_dir)
            print(f"{name} {run}: {results[f'{name}/{args.arm}/{run}']}")
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
