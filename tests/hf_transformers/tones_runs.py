"""The figures of docs/transformers.md, measured: the Monitor on healthy tone-task runs of
several seeds (false reports counted), and the stuck-on-the-pad-token story (lr 0.1) then
fixed (lr 3e-3), with held-out exact-match rates by greedy decoding.

    python tests/hf_transformers/tones_runs.py [SEEDS]      (default 6 seeds, ~1 min on one core)
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

import tones
from ctcbench.transformers import Monitor

WATCH = dict(check_every=10, window=60, flat_tol=0.05, stall_after=40)
STEPS = 150


def exact(model, items) -> float:
    """Share of held-out samples whose greedy decoding (argmax, collapse, drop <pad>) equals
    their labels."""
    b = tones.Collator()(items)
    with torch.no_grad():
        path = model.eval()(input_values=b["input_values"],
                            attention_mask=b["attention_mask"]).logits.argmax(-1)
    hits = 0
    for row, y in zip(path.tolist(), b["labels"].tolist()):
        out = [k for i, k in enumerate(row) if k != 0 and (i == 0 or row[i - 1] != k)]
        hits += out == [k for k in y if k >= 0]
    return hits / len(items)


def one(seed: int, lr: float, root: Path):
    monitor = Monitor(root / f"s{seed}-lr{lr:g}", report=print, **WATCH)
    start = time.perf_counter()
    trainer = tones.train(root / f"t{seed}-{lr:g}", tones.model(seed), tones.samples(seed, 8 * STEPS),
                          tones.Collator(), [monitor], steps=STEPS, lr=lr, seed=seed,
                          processing_class=tones.tokenizer(root / f"v{seed}"))
    seconds = time.perf_counter() - start
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    return monitor, losses, exact(trainer.model, tones.samples(1000 + seed, 64)), seconds


def main(seeds: int = 6):
    torch.set_num_threads(1)
    root = Path(tempfile.mkdtemp())
    false = 0
    for seed in range(seeds):
        monitor, losses, hit, seconds = one(seed, 3e-3, root)
        false += len(monitor.events)
        print(f"healthy seed {seed}: reports {[(e.step, e.kind) for e in monitor.events]}, "
              f"loss {losses[0]:.3g} -> {losses[-1]:.3g}, held-out exact {hit:.0%}, "
              f"{seconds:.1f} s")
    print(f"false reports on {seeds} healthy runs: {false}")
    for lr in (0.1, 3e-3):
        monitor, losses, hit, seconds = one(0, lr, root)
        print(f"seed 0 lr {lr:g}: reports {[(e.step, e.kind) for e in monitor.events]}, "
              f"logged loss every 10 steps {np.round(losses, 2).tolist()}, held-out exact "
              f"{hit:.0%}")


if __name__ == "__main__":
    main(*(int(a) for a in sys.argv[1:]))
