"""``checkpoint.pt`` of a training run: written at each eval, read back to resume the run or
to predict with its model.

It holds the full config, the step, the model, optimizer and scheduler states, torch's RNG
state and ``extra`` (CPU and wall seconds so far). A run writes it atomically right after the
eval's curve row, so a kill leaves a checkpoint at or before the curve's last complete row.
"""
from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

import torch

from ctcbench.files import atomic_write, to_json

CHECKPOINT_KEYS = ("config", "step", "model", "optimizer", "scheduler", "torch_rng", "extra")


def save_checkpoint(path: Path, *, cfg, model, opt, sched, step: int, extra: dict) -> None:
    """Write the state of a run at ``step`` (``cfg`` a ``TrainConfig``) to ``path``."""
    state = {"config": json.loads(to_json(asdict(cfg))), "step": step, "model": model.state_dict(),
             "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
             "torch_rng": torch.get_rng_state(), "extra": extra}
    atomic_write(path, lambda f: torch.save(state, f))


def load_checkpoint(path: str | Path) -> dict:
    """A checkpoint written by ``train_run``; loaded with ``weights_only=True``."""
    given, path = str(path), Path(path)
    if not given or not path.is_file():
        raise FileNotFoundError(f"checkpoint: expected an existing file, got {given!r}")
    expected = f"checkpoint: expected a checkpoint.pt written by `ctcbench convergence`, got {str(path)!r}"
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception:  # torch's own message runs over many lines and is about pickling
        raise ValueError(f"{expected} (not a torch file loadable with weights_only=True)") from None
    missing = [k for k in CHECKPOINT_KEYS if not isinstance(state, dict) or k not in state]
    if missing:
        raise ValueError(f"{expected} (missing {', '.join(missing)})")
    return state


def checkpoint_step(path: Path) -> int | None:
    """The step of the checkpoint at ``path``; None when there is none or it is unreadable."""
    try:
        return int(load_checkpoint(path)["step"])
    except (OSError, ValueError, TypeError):
        return None


def restore(state: dict, model, opt, sched) -> tuple[int, float, float]:
    """Load ``state`` into ``model``, ``opt``, ``sched`` and torch's RNG; returns ``(step,
    CPU seconds, wall seconds)`` so far. ValueError when the state does not fit them (the
    objects may then be half loaded: build them again)."""
    try:
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        torch.set_rng_state(state["torch_rng"])
        return int(state["step"]), float(state["extra"]["cpu_s"]), float(state["extra"]["wall_s"])
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise ValueError(f"checkpoint: expected a state that fits the run's config, got one "
                         f"whose weights or optimizer state do not ({type(exc).__name__})"
                         ) from None
