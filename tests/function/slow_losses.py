"""A right CTC loss in NumPy with the slow backward a first implementation often has: each
frame's backward variables are recomputed from the last frame down (``_beta_at``), so one
sample costs O(T²) steps where O(T) would do. ctcbench's numpy convention, ``f(logits (T, N,
C), targets (N, S), input_lengths (N,), target_lengths (N,), blank=) -> (loss (N,), grad
(T, N, C))``, the gradient of ``loss.sum()`` w.r.t. the logits.
"""
import numpy as np


def _lse(*terms):
    """log-sum-exp of equal-shaped arrays, -inf (not NaN) where every term is -inf."""
    stack = np.stack(terms)
    top = np.max(stack, axis=0)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", over="ignore"):
        return safe + np.log(np.sum(np.exp(stack - safe), axis=0))


def _moved(v, k, fill=-np.inf):
    """``v`` moved ``k`` places to the left, ``fill`` coming in at the end."""
    out = np.full_like(v, fill)
    out[:-k] = v[k:]
    return out


def _beta_at(e, jump, t):
    """The backward variables of frame ``t``, recomputed from the last frame: O(T - t)."""
    b = np.full(e.shape[1], -np.inf)
    b[-2:] = e[-1, -2:]
    for u in range(e.shape[0] - 2, t - 1, -1):
        b = _lse(b, _moved(b, 1), np.where(_moved(jump, 2, False), _moved(b, 2), -np.inf)) + e[u]
    return b


def ctc_loss(logits, targets, input_lengths, target_lengths, blank=0):
    T, N, C = logits.shape
    loss, grad = np.zeros(N), np.zeros((T, N, C))
    for n in range(N):
        Tn, L = int(input_lengths[n]), int(target_lengths[n])
        if Tn == 0:
            loss[n] = 0.0 if L == 0 else np.inf
            continue
        x = logits[:Tn, n].astype(np.float64)  # (Tn, C); padded frames never read
        lp = x - _lse(*x.T)[:, None]  # log_softmax
        states = np.full(2 * L + 1, blank)
        states[1::2] = targets[n, :L]
        jump = np.zeros(len(states), bool)  # the state two back may jump straight here
        jump[2:] = (states[2:] != blank) & (states[2:] != states[:-2])
        e = lp[:, states]  # (Tn, 2L+1)
        a = np.full_like(e, -np.inf)
        a[0, :2] = e[0, :2]
        for t in range(1, Tn):
            shifted1 = np.concatenate([[-np.inf], a[t - 1, :-1]])
            shifted2 = np.concatenate([[-np.inf, -np.inf], a[t - 1, :-2]])[:len(states)]
            a[t] = _lse(a[t - 1], shifted1, np.where(jump, shifted2, -np.inf)) + e[t]
        ll = _lse(*a[-1, -2:]) if len(states) > 1 else a[-1, -1]
        if ll == -np.inf:
            loss[n] = np.inf  # no path: infinite loss, zero gradient
            continue
        loss[n] = -ll
        for t in range(Tn):
            with np.errstate(invalid="ignore"):  # -inf - -inf where a class is masked
                through = a[t] + _beta_at(e, jump, t) - e[t]  # paths through (t, s)
            through[np.isneginf(e[t])] = -np.inf
            mass = np.full(C, -np.inf)
            for s, c in enumerate(states):
                mass[c] = _lse(mass[c], through[s])
            grad[t, n] = np.exp(lp[t]) - np.exp(mass - ll)
    return loss, grad
