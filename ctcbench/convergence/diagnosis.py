"""The doctor inside a training run: ``ctcbench.diagnose`` on a held-out batch's log-probs,
recorded as finding codes in the run's curve rows (``--diagnose-every N``).

A run then shows when it is on the blank plateau (``blank-collapse``) or, for a model that
feeds its recurrent layer one repeated vector, that its frames do not change along time
(``time-invariant``), next to its loss and CER.
"""
from __future__ import annotations

import numpy as np
import torch

from ctcbench.convergence.data import Pool

DIAGNOSE_BATCH = 32  # held-out lines handed to the doctor


@torch.no_grad()
def finding_codes(model, pool: Pool, *, reduction: str = "mean",
                  batch: int = DIAGNOSE_BATCH) -> list[str] | None:
    """The doctor's finding codes (ranked) for the first ``batch`` lines of ``pool``;
    ``None`` for a model without a CTC head (nothing to diagnose)."""
    from ctcbench.doctor import diagnose
    if not model.ctc:
        return None
    was_training = model.training
    model.eval()
    n = min(batch, len(pool))
    x = torch.from_numpy(pool.images[:n]).unsqueeze(1)  # (N, 1, H, W)
    log_probs = model(x).log_softmax(-1).double().numpy()  # (T, N, C)
    model.train(was_training)
    T = log_probs.shape[0]
    report = diagnose(log_probs, targets=pool.labels[:n], input_lengths=np.full(n, T),
                      target_lengths=pool.lengths[:n], blank=0,
                      reduction="sum" if reduction == "per-line" else reduction)  # doctor: torch's names
    return report.codes
