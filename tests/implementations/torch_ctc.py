"""A CTC loss as an implementer writes one in plain PyTorch: log-space alpha recursion over
time, batched over samples, autograd for the gradient; torch's calling convention.

``ctc_loss`` is right; ``ctc_loss_skips_repeats`` has one planted bug, the classic one: it lets
a path skip the blank between two equal labels, so "aa" can be read as "a".
"""
import torch

NEG = -1e30  # log(0) kept finite: -inf in a logsumexp gives a NaN gradient


def _shifted(alpha, k):
    """``alpha`` moved ``k`` states to the right, log(0) coming in."""
    pad = torch.full((alpha.shape[0], k), NEG, dtype=alpha.dtype)
    return torch.cat([pad, alpha], 1)[:, :alpha.shape[1]]


def _ctc(log_probs, targets, input_lengths, target_lengths, blank, repeat_rule):
    T, N, C = log_probs.shape
    lp = log_probs.double()  # (T, N, C) computed in float64, whatever comes in
    S = targets.shape[1]
    labels = torch.where(torch.arange(S) < target_lengths[:, None], targets, blank)  # (N, S)
    ext = torch.full((N, 2 * S + 1), blank, dtype=torch.long)
    ext[:, 1::2] = labels  # (N, 2S+1): blank, l1, blank, l2, ..., blank
    skip = torch.zeros_like(ext, dtype=torch.bool)
    skip[:, 2:] = ext[:, 2:] != blank
    if repeat_rule:
        skip[:, 2:] &= ext[:, 2:] != ext[:, :-2]
    # T tensors (N, 2S+1): indexing one (T, N, 2S+1) tensor per step would give each step's
    # backward a gradient of the whole tensor, O(T^2) work
    emit = lp.gather(2, ext[None].expand(T, -1, -1)).unbind(0)
    alpha = torch.full(ext.shape, NEG, dtype=torch.float64)
    for t in range(T):
        if t == 0:
            new = torch.full_like(alpha, NEG)
            new[:, :2] = emit[0][:, :2]
        else:
            one, two = _shifted(alpha, 1), torch.where(skip, _shifted(alpha, 2), NEG)
            new = torch.logsumexp(torch.stack([alpha, one, two]), 0) + emit[t]
        alpha = torch.where((t < input_lengths)[:, None], new, alpha)
    last = 2 * target_lengths[:, None]
    ends = torch.cat([alpha.gather(1, last),
                      torch.where(last > 0, alpha.gather(1, (last - 1).clamp(min=0)), NEG)], 1)
    loss = -torch.logsumexp(ends, 1)  # (N,)
    empty = torch.where(target_lengths == 0, 0.0, float("inf")).double()
    loss = torch.where(input_lengths == 0, empty, loss)
    loss = torch.where(loss > 1e25, float("inf"), loss)  # no path: infinite, no gradient
    # float32 log-probs of a near-certain path can round the loss a little below 0 (optax#1771):
    # said as 0, the gradient kept
    loss = torch.where(loss < 0, loss - loss.detach(), loss)
    return loss.to(log_probs.dtype)


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank=0, reduction="none"):
    return _ctc(log_probs, targets, input_lengths, target_lengths, blank, repeat_rule=True)


def ctc_loss_skips_repeats(log_probs, targets, input_lengths, target_lengths, blank=0,
                           reduction="none"):
    return _ctc(log_probs, targets, input_lengths, target_lengths, blank, repeat_rule=False)
