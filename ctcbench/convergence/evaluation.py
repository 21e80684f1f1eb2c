"""A model scored on a held-out pool: loss, character error rate, sequence accuracy, blank
fraction and characters emitted per line, from its decoded outputs."""
from __future__ import annotations

import numpy as np
import torch

from ctcbench.convergence.batches import tensors
from ctcbench.convergence.ctc import model_loss
from ctcbench.convergence.data import Pool
from ctcbench.convergence.decode import beam_decode, error_rates
from ctcbench.core.ctcmath import greedy_decode


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
    """Held-out loss (the mean over lines of each batch's loss), CER, sequence accuracy,
    blank fraction (of argmax frames; NaN without a CTC head), mean characters emitted, and
    the first line as read (``example``)."""
    model.eval()
    losses, preds, refs, blank_frames, frames = [], [], [], 0, 0
    for start in range(0, len(pool), batch_size):
        idx = np.arange(start, min(start + batch_size, len(pool)))
        x, targets, lengths = tensors(pool, idx)
        loss, out = model_loss(model, loss_fn, x, targets, lengths)
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
