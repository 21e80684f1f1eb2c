"""A CTC loss and its gradient as an implementer writes them in NumPy: log-space alpha and
beta per sample, the gradient w.r.t. the logits from their product; ctcbench's numpy
convention, ``(loss (N,), grad (T, N, C))``.

``ctc_loss`` is right; ``ctc_loss_skips_repeats`` has one planted bug: a path may skip the
blank between two equal labels.
"""
import numpy as np


def _log_sum(*terms):
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.logaddexp.reduce(np.stack(terms), axis=0)


def _shifted(v, k, fill=-np.inf):
    """``v`` moved ``k`` places along its last axis (right for k > 0), ``fill`` coming in."""
    out = np.full_like(v, fill)
    if k > 0:
        out[..., k:] = v[..., :-k]
    else:
        out[..., :k] = v[..., -k:]
    return out


def _ctc(logits, targets, input_lengths, target_lengths, blank, repeat_rule):
    T, N, C = logits.shape
    x = logits.astype(np.float64)
    lp = x - np.logaddexp.reduce(x, axis=2, keepdims=True)  # (T, N, C) log_softmax
    loss, grad = np.zeros(N), np.zeros((T, N, C))
    for n in range(N):
        Tn, L = int(input_lengths[n]), int(target_lengths[n])
        if Tn == 0:
            loss[n] = 0.0 if L == 0 else np.inf
            continue
        ext = np.full(2 * L + 1, blank)
        ext[1::2] = targets[n, :L]  # blank, l1, blank, ..., blank
        skip = np.zeros(len(ext), bool)
        skip[2:] = ext[2:] != blank
        if repeat_rule:
            skip[2:] &= ext[2:] != ext[:-2]
        e = lp[:Tn, n][:, ext]  # (Tn, 2L+1)
        a, b = np.full_like(e, -np.inf), np.full_like(e, -np.inf)
        a[0, :2] = e[0, :2]
        for t in range(1, Tn):
            a[t] = _log_sum(a[t - 1], _shifted(a[t - 1], 1),
                            np.where(skip, _shifted(a[t - 1], 2), -np.inf)) + e[t]
        b[-1, -2:] = e[-1, -2:]
        for t in range(Tn - 2, -1, -1):
            b[t] = _log_sum(b[t + 1], _shifted(b[t + 1], -1),
                            _shifted(np.where(skip, b[t + 1], -np.inf), -2)) + e[t]
        ll = _log_sum(*a[-1, -2:])
        if ll == -np.inf:
            loss[n] = np.inf  # no path: infinite, gradient zero
            continue
        loss[n] = max(-ll, 0.0)  # a probability above 1 is rounding
        through = np.where(np.isneginf(e), -np.inf, a + b - np.where(np.isneginf(e), 0, e))
        gamma = np.full((Tn, C), -np.inf)  # log of the paths' mass on each class
        for s, c in enumerate(ext):
            gamma[:, c] = _log_sum(gamma[:, c], through[:, s])
        grad[:Tn, n] = np.exp(lp[:Tn, n]) - np.exp(gamma - ll)
    return loss, grad


def ctc_loss(logits, targets, input_lengths, target_lengths, blank=0):
    return _ctc(logits, targets, input_lengths, target_lengths, blank, repeat_rule=True)


def ctc_loss_skips_repeats(logits, targets, input_lengths, target_lengths, blank=0):
    return _ctc(logits, targets, input_lengths, target_lengths, blank, repeat_rule=False)
