"""One training run: an explicit, seeded loop that logs metrics every eval interval.

Files in the run folder (written as the run goes, so an interrupted run can resume):
  config.json      the full TrainConfig (any curve can be reproduced from it)
  curve.jsonl      one row per eval: step, losses, CER, sequence accuracy, blank fraction,
                   mean emitted characters per line, gradient/update norms, lr, CPU and wall time;
                   with ``diagnose_every``, ``findings``: the doctor's codes (or null)
  checkpoint.pt    model + optimizer + scheduler + RNG state at the last eval
  summary.json     the derived row (written when the run finishes)

Derived per run (``summarize``):
  plateau_end_step  the first eval step after step 0 at which greedy decoding of the held-out
                    set emits on average at least one character per line (``emitted >= 1``).
                    Before it the model predicts (almost) only blanks: the blank plateau. The
                    untrained model at step 0 emits random characters and is not counted.
  steps_to_cer10 / steps_to_cer02   first eval step with held-out CER < 10% / < 2%; ``None``
                    (censored) if the run ended first.
"""
from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path

import numpy as np
import torch

from ctcbench.convergence.config import (NON_NEGATIVE, NON_NEGATIVE_INT, POSITIVE, ConfigError,
                                         at_least, check_config, expect, in_unit_interval,
                                         setting)
from ctcbench.convergence.ctc import TRAIN_REDUCTIONS, ctc_loss_fn
from ctcbench.convergence.data import DataConfig, Pool, load_pool
from ctcbench.convergence.decode import MAX_BEAM, beam_decode, error_rates
from ctcbench.convergence.diagnosis import finding_codes
from ctcbench.convergence.models import ModelConfig, build_model, num_params
from ctcbench.core.ctcmath import greedy_decode
from ctcbench.runs.store import RowLog
from ctcbench.files import atomic_write, to_json

OPTIMIZERS = {
    "adam": lambda p, c: torch.optim.Adam(p, lr=c.lr, betas=(c.beta1, c.beta2),
                                          weight_decay=c.weight_decay),
    "rmsprop": lambda p, c: torch.optim.RMSprop(p, lr=c.lr, alpha=c.alpha, momentum=c.momentum,
                                                weight_decay=c.weight_decay),
    "sgd": lambda p, c: torch.optim.SGD(p, lr=c.lr, momentum=c.momentum, weight_decay=c.weight_decay),
    "adamw": lambda p, c: torch.optim.AdamW(p, lr=c.lr, betas=(c.beta1, c.beta2),
                                            weight_decay=c.weight_decay),
    "adadelta": lambda p, c: torch.optim.Adadelta(p, lr=c.lr, weight_decay=c.weight_decay),
}


@dataclass
class TrainConfig:
    """Everything one training run depends on. Each field is a ``setting``: its option,
    config-file key and check come from here (see ctcbench.convergence.config)."""

    optimizer: str = setting("rmsprop", "Optimizer (tuned by --beta1, --beta2, --alpha, "
                             "--momentum, --weight-decay).", choices=lambda: OPTIMIZERS,
                             grid="optimizers")
    lr: float = setting(1e-3, "Learning rate.", check=POSITIVE, grid="lrs")
    beta1: float = setting(0.9, "Adam/AdamW beta1.", check=in_unit_interval(closed=False))
    beta2: float = setting(0.999, "Adam/AdamW beta2.", check=in_unit_interval(closed=False))
    alpha: float = setting(0.99, "RMSprop smoothing.", check=in_unit_interval(closed=True))
    momentum: float = setting(0.0, "RMSprop/SGD momentum.", check=NON_NEGATIVE)
    weight_decay: float = setting(0.0, "Weight decay (every optimizer).", check=NON_NEGATIVE)
    clip: float = setting(0.0, "Max gradient norm (0 = off).", check=NON_NEGATIVE)
    warmup: int = setting(0, "Linear lr warm-up steps.", check=at_least(0))
    steps: int = setting(600, "Training steps per run.", check=at_least(1))
    batch_size: int = setting(32, "Lines per step.", check=at_least(1))
    curriculum_steps: int = setting(0, "Short-line curriculum: for the first N steps, batches "
                                    "come only from training lines of at most --curriculum-len "
                                    "characters (0 = off).", check=NON_NEGATIVE_INT)
    curriculum_len: int = setting(3, "Longest line in a curriculum step.", check=at_least(1))
    eval_every: int = setting(25, "Steps between held-out evaluations.", check=at_least(1))
    reduction: str = setting("mean", "Reduction of the CTC loss over the batch.",
                             choices=lambda: TRAIN_REDUCTIONS)
    ctc_backend: str = setting("torch", "Registry backend for the loss (numpy = float64 "
                               "reference, slow).")
    seed: int = setting(0, "Seed for init and batch order.", check=NON_NEGATIVE_INT, grid="seeds")
    threads: int = setting(1, "Torch threads per run.", check=at_least(1))
    beam: int = setting(0, "Also score the final model with prefix beam search of this width.",
                        check=(lambda v: 0 <= v <= MAX_BEAM,
                               f"an integer in [0, {MAX_BEAM}] (0 = greedy only)"))
    diagnose_every: int = setting(0, "Every N steps (a multiple of --eval-every) run "
                                  "ctcbench.diagnose on a held-out batch and record the finding "
                                  "codes in the curve rows (0 = off).", check=NON_NEGATIVE_INT)
    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)

    def check(self) -> "TrainConfig":
        return check_config(self)

    def relations(self) -> list[tuple[str, bool, str, object]]:
        """Checks across fields, for ``check_config``: (field, holds, expected, got)."""
        return [("diagnose_every", self.diagnose_every % self.eval_every == 0,
                 f"a multiple of eval_every ({self.eval_every})", self.diagnose_every),
                ("curriculum_len",
                 not self.curriculum_steps or self.curriculum_len >= self.data.min_len,
                 f"at least data.min_len ({self.data.min_len}) when curriculum_steps > 0, "
                 "or no line is short enough", self.curriculum_len)]

    @classmethod
    def from_dict(cls, d: dict) -> "TrainConfig":
        d = dict(d)
        model = ModelConfig(**d.pop("model", {}))
        data = DataConfig(**d.pop("data", {}))
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known}, model=model, data=data)


# curve.jsonl spells inf/nan as strings (JSON has no such numbers); these fields read back as floats
CURVE_FLOATS = ("train_loss", "test_loss", "cer", "seq_acc", "blank_frac", "emitted", "grad_norm",
                "update_norm", "lr", "cpu_s", "wall_s")


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
        expect(cfg.data.max_len <= T, "data.max_len",
                f"at most {T} (the frames {cfg.model.name} gives a {cfg.data.width}-px line)",
                cfg.data.max_len)


def batch_indices(seed: int, step: int, pool_size: int, batch_size: int,
                  among: np.ndarray | None = None) -> np.ndarray:
    """The samples of ``step``: a pure function of (seed, step), so a resumed run sees the
    same batches as an uninterrupted one. ``among``: draw only from these pool indices."""
    rng = np.random.default_rng([seed, step])
    if among is None:
        return rng.integers(0, pool_size, size=batch_size)
    return among[rng.integers(0, len(among), size=batch_size)]


def _tensors(pool: Pool, idx):
    x = torch.from_numpy(pool.images[idx]).unsqueeze(1)  # (N, 1, H, W)
    return x, torch.from_numpy(pool.labels[idx]), torch.from_numpy(pool.lengths[idx])


def _model_loss(model, loss_fn, x, targets, lengths):
    """(scalar loss, logits) for either head type."""
    out = model(x)
    if model.ctc:  # out: (T, N, C)
        T, N, _ = out.shape
        input_lengths = torch.full((N,), T, dtype=torch.long)
        return loss_fn(out, targets, input_lengths, lengths), out
    # per-position: out (N, max_len, C); class 0 marks positions past the end
    return torch.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), targets.reshape(-1)), out


def decode_outputs(model, out: torch.Tensor, *, beam: int = 0) -> list[tuple[int, ...]]:
    """Model outputs -> label tuples (greedy, or prefix beam search when ``beam`` > 0)."""
    if not model.ctc:  # (N, max_len, C): argmax per position, drop "no character"
        best = out.argmax(-1).numpy()
        return [tuple(int(k) for k in row if k != 0) for row in best]
    lp = out.log_softmax(-1).double().numpy()  # (T, N, C)
    lengths = np.full(lp.shape[1], lp.shape[0])
    return beam_decode(lp, lengths, beam=beam) if beam > 0 else greedy_decode(lp, lengths)


@torch.no_grad()
def evaluate(model, loss_fn, pool: Pool, *, batch_size: int = 128, beam: int = 0) -> dict:
    """Held-out loss, CER, sequence accuracy, blank fraction, mean emitted characters."""
    model.eval()
    losses, preds, refs, blank_frames, frames = [], [], [], 0, 0
    for start in range(0, len(pool), batch_size):
        idx = np.arange(start, min(start + batch_size, len(pool)))
        x, targets, lengths = _tensors(pool, idx)
        loss, out = _model_loss(model, loss_fn, x, targets, lengths)
        losses.append(float(loss) * len(idx))
        preds += decode_outputs(model, out, beam=beam)
        refs += [tuple(pool.labels[i, : pool.lengths[i]].tolist()) for i in idx]
        if model.ctc:
            am = out.argmax(-1)  # (T, N)
            blank_frames += int((am == 0).sum())
            frames += am.numel()
    model.train()
    cer, acc = error_rates(preds, refs)
    return {"test_loss": sum(losses) / len(pool), "cer": cer, "seq_acc": acc,
            "blank_frac": blank_frames / frames if frames else float("nan"),
            "emitted": float(np.mean([len(p) for p in preds])),
            "example": "".join(pool.charset[k - 1] for k in preds[0])}


def _lr_lambda(warmup: int):
    return lambda step: min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0


def _save_checkpoint(path: Path, *, cfg, model, opt, sched, step, extra) -> None:
    state = {"config": json.loads(to_json(asdict(cfg))), "step": step, "model": model.state_dict(),
             "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
             "torch_rng": torch.get_rng_state(), "extra": extra}
    atomic_write(path, lambda f: torch.save(state, f))


def load_checkpoint(path: str | Path) -> dict:
    """A checkpoint written by ``train_run``; loaded with ``weights_only=True``."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"checkpoint: expected an existing file, got {str(path)!r}")
    expected = f"checkpoint: expected a checkpoint.pt written by `ctcbench convergence`, got {str(path)!r}"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # torch's own message runs over many lines and is about pickling
        raise ValueError(f"{expected} (not a torch file loadable with weights_only=True)") from None
    missing = [k for k in CHECKPOINT_KEYS if not isinstance(state, dict) or k not in state]
    if missing:
        raise ValueError(f"{expected} (missing {', '.join(missing)})")
    return state


CHECKPOINT_KEYS = ("config", "step", "model", "optimizer", "scheduler", "torch_rng", "extra")


def model_from_checkpoint(path) -> tuple[torch.nn.Module, TrainConfig]:
    state = load_checkpoint(path)
    try:
        cfg = TrainConfig.from_dict(state["config"])
    except (TypeError, ValueError, AttributeError):
        raise ValueError(f"checkpoint: expected a config written by `ctcbench convergence`, "
                         f"got {str(path)!r} (its config has unknown or missing fields)") from None
    try:  # a charset that cannot name the model's classes would fail at decode time
        cfg.check()
    except ConfigError as exc:
        raise ValueError(f"checkpoint: expected a valid config, got {str(path)!r} "
                         f"(config {exc})") from None
    if cfg.model.num_classes != len(cfg.data.charset) + 1:
        raise ValueError(f"checkpoint: expected model.num_classes = len(data.charset) + 1 = "
                         f"{len(cfg.data.charset) + 1}, got {cfg.model.num_classes} in "
                         f"{str(path)!r}")
    try:
        model = build_model(cfg.model)
        model.load_state_dict(state["model"])
    except (TypeError, ValueError, KeyError, RuntimeError, AttributeError):
        raise ValueError(f"checkpoint: expected a model and config written by `ctcbench "
                         f"convergence`, got {str(path)!r} (its weights do not fit its "
                         f"config)") from None
    model.eval()
    return model, cfg


def train_run(cfg: TrainConfig, run_dir: str | Path, *, train: Pool | None = None,
              test: Pool | None = None, cache_dir=None, resume: bool = False,
              progress=None) -> dict:
    """Train one model, logging to ``run_dir``; returns the summary row.

    ``progress(n)`` is called with the number of steps just done (for a progress bar).
    With ``resume``, a run folder holding a checkpoint continues from it; a finished run
    returns its stored summary.
    """
    cfg = cfg.check()
    _sync_model_config(cfg)
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    ckpt_path, summary_path = run_dir / "checkpoint.pt", run_dir / "summary.json"
    if resume and summary_path.exists():
        if progress:
            progress(cfg.steps)
        return json.loads(summary_path.read_text())
    torch.set_num_threads(cfg.threads)
    torch.manual_seed(cfg.seed)
    train = train if train is not None else load_pool(cfg.data, "train", cache_dir=cache_dir)
    test = test if test is not None else load_pool(cfg.data, "test", cache_dir=cache_dir)
    model = build_model(cfg.model)
    opt = OPTIMIZERS[cfg.optimizer](model.parameters(), cfg)
    sched = torch.optim.lr_scheduler.LambdaLR(opt, _lr_lambda(cfg.warmup))
    loss_fn = ctc_loss_fn(cfg.ctc_backend, reduction=cfg.reduction)
    log = RowLog(run_dir / "curve.jsonl")

    step, cpu0, wall0 = 0, 0.0, 0.0
    if resume and ckpt_path.exists():
        state = load_checkpoint(ckpt_path)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        step, cpu0, wall0 = state["step"], state["extra"]["cpu_s"], state["extra"]["wall_s"]
        # drop rows written after the checkpoint (at most one eval interval is redone)
        rows = [r for r in log.rows(floats=CURVE_FLOATS) if r["step"] <= step]
        log.path.write_text("".join(to_json(r) + "\n" for r in rows))
        if progress:
            progress(step)
    else:
        log.path.write_text("")
    (run_dir / "config.json").write_text(to_json(asdict(cfg), indent=2) + "\n")

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
        log.append(row)
        _save_checkpoint(ckpt_path, cfg=cfg, model=model, opt=opt, sched=sched, step=step,
                         extra={"cpu_s": row["cpu_s"], "wall_s": row["wall_s"]})
        train_losses.clear()

    if step == 0:
        log_eval(0)
    params = [p for p in model.parameters()]
    short = np.flatnonzero(train.lengths <= cfg.curriculum_len)  # the curriculum's lines
    if cfg.curriculum_steps and not len(short):
        raise ConfigError("curriculum_len", f"expected a length some training line has (the "
                          f"shortest has {int(train.lengths.min())}), got {cfg.curriculum_len}")
    while step < cfg.steps:
        idx = batch_indices(cfg.seed, step, len(train), cfg.batch_size,
                            among=short if step < cfg.curriculum_steps else None)
        x, targets, lengths = _tensors(train, idx)  # (N, 1, H, W), (N, L), (N,)
        loss, _ = _model_loss(model, loss_fn, x, targets, lengths)
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
    summary_path.write_text(to_json(summary, indent=2) + "\n")
    return summary


def _identity(cfg: TrainConfig) -> dict:
    """The config fields a summary row is grouped by."""
    return {"optimizer": cfg.optimizer, "lr": cfg.lr, "seed": cfg.seed, "model": cfg.model.name,
            "batchnorm": cfg.model.batchnorm, "data": cfg.data.kind, "beta1": cfg.beta1,
            "ctc_backend": cfg.ctc_backend}


def _first(rows, pred):
    return next((r["step"] for r in rows if pred(r)), None)


def summarize(rows: list[dict]) -> dict:
    """Derived numbers of one curve (see the module docstring for definitions)."""
    last = rows[-1]
    return {
        "steps": last["step"],
        "plateau_end_step": _first(rows, lambda r: r["step"] > 0 and r["emitted"] >= 1.0),
        "steps_to_cer10": _first(rows, lambda r: r["cer"] < 0.10),
        "steps_to_cer02": _first(rows, lambda r: r["cer"] < 0.02),
        "final_cer": last["cer"], "final_seq_acc": last["seq_acc"],
        "final_test_loss": last["test_loss"], "final_blank_frac": last["blank_frac"],
        "cpu_s": last["cpu_s"], "wall_s": last["wall_s"],
    }
