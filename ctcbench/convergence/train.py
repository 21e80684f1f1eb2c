"""One training run: an explicit, seeded loop over its ``TrainConfig`` (trainconfig.py) that
logs metrics every eval interval.

Files in the run folder, written as the run goes so that an interrupted run can resume:
  config.json      the full TrainConfig (any curve can be reproduced from it)
  curve.jsonl      one row per eval (see ctcbench.convergence.curve)
  checkpoint.pt    the run's state at the last eval (see ctcbench.convergence.checkpoints)
  summary.json     the derived row (written when the run finishes)

Resuming (``train_run(..., resume=True)``) keeps the curve's complete rows (up to its first
torn or missing row) and continues from the checkpoint when it is at one of them; the rows
after the checkpoint are done again, so each eval step is in the curve once, with the values
an uninterrupted run gives (all but the CPU and wall times). A checkpoint that cannot be read,
or that is past the last complete row, restarts the run from step 0, with a note on stderr.
"""
from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import torch

from ctcbench.convergence.batches import batch_indices, tensors
from ctcbench.convergence.checkpoints import load_checkpoint, restore, save_checkpoint
from ctcbench.settings import ConfigError, expect
from ctcbench.convergence.ctc import ctc_loss_fn, model_loss
from ctcbench.convergence.curve import (CURVE_FLOATS, complete_rows, eval_steps, summarize,
                                        write_rows)
from ctcbench.convergence.data import Pool, load_pool
from ctcbench.convergence.diagnosis import finding_codes
from ctcbench.convergence.evaluation import evaluate
from ctcbench.convergence.models import build_model, num_params
from ctcbench.convergence.optimizers import make_optimizer
from ctcbench.convergence.trainconfig import TrainConfig
from ctcbench.files import atomic_write, to_json
from ctcbench.runs.store import RowLog


def _sync_model_config(cfg: TrainConfig) -> None:
    """The model's class count, height, width and max length follow the data."""
    cfg.model.num_classes = len(cfg.data.charset) + 1
    cfg.model.height, cfg.model.width = cfg.data.height, cfg.data.width
    cfg.model.max_len = cfg.data.max_len


def check_fits(cfg: TrainConfig) -> None:
    """A CTC model must give at least ``max_len`` frames for a line, else the longest targets
    are infeasible and (with zero_infinity) silently teach nothing."""
    cfg = TrainConfig.from_dict(asdict(cfg))
    _sync_model_config(cfg)
    model = build_model(cfg.model)
    if model.ctc:
        T = model.frames(cfg.data.width)
        if getattr(model, "windows", None) is not None:  # linecnn(lstm)'s WindowCNN
            expect(cfg.model.window <= cfg.data.width, "model.window",
                   f"at most data.width ({cfg.data.width}): {cfg.model.name} slides windows "
                   f"of this many pixels along the line", cfg.model.window)
        expect(cfg.data.max_len <= T, "data.max_len",
                f"at most {T} (the frames {cfg.model.name} gives a {cfg.data.width}-px line)",
                cfg.data.max_len)


def _note(text: str) -> None:
    print(f"note: {text}", file=sys.stderr)


def _fresh(cfg: TrainConfig):
    """The seeded model, optimizer and scheduler of step 0."""
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model)
    return (model, *make_optimizer(model.parameters(), cfg))


def _resume_point(cfg: TrainConfig, curve: Path, ckpt: Path) -> tuple[dict | None, list[dict]]:
    """``(checkpoint state or None for step 0, curve rows kept)`` of a resumed run (see the
    module docstring)."""
    rows = complete_rows(curve, eval_steps(cfg.steps, cfg.eval_every))
    if not ckpt.exists():
        return None, []
    try:
        state = load_checkpoint(ckpt)
    except ValueError as exc:
        _note(f"{exc}; restarted the run from step 0")
        return None, []
    done = [r["step"] for r in rows]
    if state["step"] not in done:
        last = f"step {done[-1]}" if done else "none"
        _note(f"{ckpt}: checkpoint at step {state['step']} but the last complete row of "
              f"{curve.name} is {last}; restarted the run from step 0")
        return None, []
    return state, [r for r in rows if r["step"] <= state["step"]]


def _finished(summary_path: Path) -> dict | None:
    """The stored summary of a finished run; None when there is none, or it is unreadable
    (the run's end is then done again from its checkpoint)."""
    if not summary_path.exists():
        return None
    try:
        return json.loads(summary_path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        _note(f"{summary_path}: unreadable; the run's end is done again from its checkpoint")
        return None


def train_run(cfg: TrainConfig, run_dir: str | Path, *, train: Pool | None = None,
              test: Pool | None = None, cache_dir=None, resume: bool = False,
              progress=None) -> dict:
    """Train one model, logging to ``run_dir``; returns the summary row.

    ``progress(n)`` is called with the number of steps just done (for a progress bar).
    With ``resume``, a run folder holding a checkpoint continues from it (see the module
    docstring); a finished run returns its stored summary.
    """
    cfg = cfg.check()
    _sync_model_config(cfg)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt_path, summary_path = run_dir / "checkpoint.pt", run_dir / "summary.json"
    stored = _finished(summary_path) if resume else None
    if stored is not None:
        if progress:
            progress(cfg.steps)
        return stored
    summary_path.unlink(missing_ok=True)  # a summary from before this run's start is not its own
    torch.set_num_threads(cfg.threads)
    train = train if train is not None else load_pool(cfg.data, "train", cache_dir=cache_dir)
    test = test if test is not None else load_pool(cfg.data, "test", cache_dir=cache_dir)
    model, opt, sched = _fresh(cfg)
    loss_fn = ctc_loss_fn(cfg.ctc_backend, reduction=cfg.reduction)
    log = RowLog(run_dir / "curve.jsonl")

    step, cpu0, wall0 = 0, 0.0, 0.0
    state, rows = _resume_point(cfg, log.path, ckpt_path) if resume else (None, [])
    if state is not None:
        try:
            step, cpu0, wall0 = restore(state, model, opt, sched)
        except ValueError as exc:
            _note(f"{ckpt_path}: {exc}; restarted the run from step 0")
            model, opt, sched = _fresh(cfg)
            rows = []
    write_rows(log.path, rows)  # the rows kept; the steps after them are done again
    if progress and step:
        progress(step)
    atomic_write(run_dir / "config.json", to_json(asdict(cfg), indent=2) + "\n")

    cpu_start, wall_start = time.process_time() - cpu0, time.perf_counter() - wall0
    model.train()
    train_losses, grad_norm, update_norm = [], float("nan"), float("nan")

    def log_eval(step):
        row = {"step": step, "train_loss": float(np.mean(train_losses)) if train_losses else None,
               **evaluate(model, loss_fn, test), "grad_norm": grad_norm, "update_norm": update_norm,
               "lr": opt.param_groups[0]["lr"],
               "cpu_s": time.process_time() - cpu_start, "wall_s": time.perf_counter() - wall_start}
        if cfg.diagnose_every:  # the doctor's finding codes; None between diagnosed steps
            row["findings"] = (finding_codes(model, test, reduction=cfg.reduction)
                               if step % cfg.diagnose_every == 0 else None)
        log.append(row)  # the row first: a checkpoint is never ahead of the curve
        save_checkpoint(ckpt_path, cfg=cfg, model=model, opt=opt, sched=sched, step=step,
                        extra={"cpu_s": row["cpu_s"], "wall_s": row["wall_s"]})
        train_losses.clear()

    if not rows:  # a run from step 0 logs it; a resumed one holds the row of its checkpoint
        log_eval(0)
    params = [p for p in model.parameters()]
    short = np.flatnonzero(train.lengths <= cfg.curriculum_len)  # the curriculum's lines
    if cfg.curriculum_steps and not len(short):
        raise ConfigError("curriculum_len", f"expected a length some training line has (the "
                          f"shortest has {int(train.lengths.min())}), got {cfg.curriculum_len}")
    while step < cfg.steps:
        idx = batch_indices(cfg.seed, step, len(train), cfg.batch_size,
                            among=short if step < cfg.curriculum_steps else None)
        x, targets, lengths = tensors(train, idx)  # (N, 1, H, W), (N, L), (N,)
        loss, _ = model_loss(model, loss_fn, x, targets, lengths)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        grads = [p.grad for p in params if p.grad is not None]
        grad_norm = float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))
        if cfg.clip > 0:
            torch.nn.utils.clip_grad_norm_(params, cfg.clip)
        before = [p.detach().clone() for p in params]
        opt.step()
        sched.step()
        update_norm = float(torch.linalg.vector_norm(
            torch.stack([(p.detach() - b).norm() for p, b in zip(params, before)])))
        train_losses.append(float(loss.detach()))
        step += 1
        if progress:
            progress(1)
        if step % cfg.eval_every == 0 or step == cfg.steps:
            log_eval(step)

    rows = log.rows(floats=CURVE_FLOATS)
    summary = summarize(rows)
    if cfg.beam > 0:
        final = evaluate(model, loss_fn, test, beam=cfg.beam)
        summary.update(beam_cer=final["cer"], beam_seq_acc=final["seq_acc"])
    summary.update(run=run_dir.name, run_dir=str(run_dir), checkpoint=str(ckpt_path),
                   params=num_params(model), **_identity(cfg))
    atomic_write(summary_path, to_json(summary, indent=2) + "\n")
    return summary


def _identity(cfg: TrainConfig) -> dict:
    """The config fields a summary row is grouped by."""
    return {"optimizer": cfg.optimizer, "lr": cfg.lr, "seed": cfg.seed, "model": cfg.model.name,
            "batchnorm": cfg.model.batchnorm, "data": cfg.data.kind, "beta1": cfg.beta1,
            "ctc_backend": cfg.ctc_backend}
