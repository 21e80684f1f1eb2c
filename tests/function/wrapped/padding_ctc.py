"""A CTC loss in NumPy, batched over samples with masks, in ctcbench's numpy convention
``(loss (N,), grad (T, N, C))``.

``ctc_loss`` keeps padded frames out with ``np.where``; ``ctc_loss_masks_by_multiplying`` has
the planted bug: it takes log_softmax over every frame and keeps padded frames out by
multiplying with the mask, so a NaN there stays NaN (NaN * 0) and the backward recursion,
which starts at the last frame, carries it into every valid frame. With zeros in the padding
it is right.
"""
import numpy as np

NEG = -1e30  # log(0) kept finite


def _log_softmax(x):
    m = x.max(axis=-1, keepdims=True)
    return x - m - np.log(np.exp(x - m).sum(axis=-1, keepdims=True))


def _lse(*terms):
    with np.errstate(invalid="ignore"):  # NaN in, NaN out: the planted bug's own
        return np.logaddexp.reduce(np.stack(terms), axis=0)


def _shift(v, k):
    """``v (N, S)`` moved ``k`` states along S (right for k > 0), log(0) coming in."""
    out = np.full_like(v, NEG)
    if k > 0:
        out[:, k:] = v[:, :-k]
    else:
        out[:, :k] = v[:, -k:]
    return out


def _ctc(logits, targets, input_lengths, target_lengths, blank, multiply):
    T, N, C = logits.shape
    x = np.asarray(logits, np.float64)
    valid = (np.arange(T)[:, None] < input_lengths[None, :])[..., None]  # (T, N, 1)
    with np.errstate(invalid="ignore", over="ignore"):
        lp = _log_softmax(x) * valid if multiply else _log_softmax(np.where(valid, x, 0.0))
    L = targets.shape[1]
    labels = np.where(np.arange(L)[None, :] < target_lengths[:, None], targets, blank)
    ext = np.full((N, 2 * L + 1), blank)
    ext[:, 1::2] = labels  # (N, S) blank, l1, blank, ..., blank
    S = ext.shape[1]
    skip = np.zeros((N, S), bool)
    skip[:, 2:] = (ext[:, 2:] != blank) & (ext[:, 2:] != ext[:, :-2])
    emit = np.take_along_axis(lp, np.broadcast_to(ext[None], (T, N, S)), 2)  # (T, N, S)
    ends = np.arange(S)[None, :] >= 2 * target_lengths[:, None] - 1  # (N, S) the last two
    ends &= np.arange(S)[None, :] <= 2 * target_lengths[:, None]
    alpha, beta = np.full((T, N, S), NEG), np.full((T, N, S), NEG)
    alpha[0, :, :2] = emit[0, :, :2]
    for t in range(1, T):
        alpha[t] = _lse(alpha[t - 1], _shift(alpha[t - 1], 1),
                        np.where(skip, _shift(alpha[t - 1], 2), NEG)) + emit[t]
    # beta from the last frame down: each sample's own last frame starts it
    last = input_lengths[None, :, None] - 1 == np.arange(T)[:, None, None]  # (T, N, 1)
    for t in range(T - 1, -1, -1):
        nxt = beta[t + 1] if t + 1 < T else np.full((N, S), NEG)
        with np.errstate(invalid="ignore"):
            nxt_emit = emit[t + 1] if t + 1 < T else np.zeros((N, S))
            step = _lse(nxt + nxt_emit, _shift(nxt + nxt_emit, -1),
                        _shift(np.where(skip, nxt + nxt_emit, NEG), -2))
        start = np.where(ends, 0.0, NEG)
        if multiply:  # the bug: a padded frame's NaN survives NaN * 0
            beta[t] = last[t] * start + (1 - last[t]) * step
        else:
            beta[t] = np.where(last[t], start, step)
    ll = np.array([np.logaddexp.reduce(alpha[input_lengths[n] - 1, n][ends[n]])
                   for n in range(N)])  # (N,) every sample has frames and a path here
    loss = -ll
    post = np.exp(alpha + beta - ll[None, :, None])  # (T, N, S) state posteriors
    gamma = np.zeros((T, N, C))
    for n in range(N):
        for s in range(S):
            gamma[:, n, ext[n, s]] += post[:, n, s]
    with np.errstate(invalid="ignore"):
        grad = (np.exp(lp) - gamma) * valid if multiply else np.where(valid, np.exp(lp) - gamma, 0)
    return loss, grad


def ctc_loss(logits, targets, input_lengths, target_lengths, blank=0):
    return _ctc(logits, targets, input_lengths, target_lengths, blank, multiply=False)


def ctc_loss_masks_by_multiplying(logits, targets, input_lengths, target_lengths, blank=0):
    return _ctc(logits, targets, input_lengths, target_lengths, blank, multiply=True)
