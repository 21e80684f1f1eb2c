"""A CTC loss in NumPy, right in ``ctc_loss``, and the same loss with one common fault each
(``ctc_loss_<fault>``): ctcbench's numpy convention, ``f(logits (T, N, C), targets (N, S),
input_lengths (N,), target_lengths (N,), blank=) -> (loss (N,), grad (T, N, C))``.

Each fault is written the way it slips into real code (an index that wraps, a constant for
log(0), a skip rule without its repeat test), not as a copy of ctcbench's fault models.
"""
import numpy as np

FAULTS = ("repeats", "trailing_blank", "leading_blank", "log_zero", "zero_length",
          "empty_target", "probs", "logits", "per_target", "per_input", "batch_sum",
          "blank_zero", "blank_last", "past_length", "padded_frames", "grad_log_probs",
          "nan_softmax")


def _lse(stack):
    """log-sum-exp over the first axis, -inf (not NaN) where every term is -inf."""
    stack = np.asarray(stack)
    top = np.max(stack, axis=0)
    safe = np.where(np.isfinite(top), top, 0.0)
    with np.errstate(divide="ignore", over="ignore"):
        return safe + np.log(np.sum(np.exp(stack - safe), axis=0))


def _states(labels, blank, fault):
    """The state sequence: blank, l1, blank, ..., lL, blank (less what a fault drops), and for
    each state whether the state two back may jump straight into it."""
    states = []
    for k in labels:
        states += [blank, int(k)]
    states.append(blank)
    if fault == "leading_blank" and len(labels):
        states = states[1:]
    if fault == "trailing_blank" and len(labels):
        states = states[:-1]
    jump = [i >= 2 and s != blank and (fault == "repeats" or s != states[i - 2])
            for i, s in enumerate(states)]
    return np.array(states), np.array(jump)


def _one(x, labels, blank, fault, dtype):
    """Loss and gradient w.r.t. the logits ``x (F, C)`` of one sample's frames."""
    F, C = x.shape
    neg = float(np.finfo(np.float32).min) if fault == "log_zero" else -np.inf
    if fault == "logits":
        scores = x.copy()  # log_softmax forgotten
    else:
        shifted = x - x.max(axis=1, keepdims=True)
        scores = shifted - np.log(np.exp(shifted).sum(axis=1, keepdims=True))
        if fault == "probs":
            scores = np.exp(scores)  # probabilities passed on as if log-probabilities
    states, jump = _states(labels, blank, fault)
    S = len(states)
    e = scores[:, states]  # (F, S)
    alpha = np.full((F, S), neg)
    alpha[0, 0] = e[0, 0]
    if S > 1 and fault != "leading_blank":
        alpha[0, 1] = e[0, 1]
    for t in range(1, F):
        for s in range(S):
            terms = [alpha[t - 1, s]]
            if s >= 1:
                terms.append(alpha[t - 1, s - 1])
            if jump[s]:
                terms.append(alpha[t - 1, s - 2])
            alpha[t, s] = _lse(terms) + e[t, s]
    if fault == "trailing_blank" and len(labels):
        last = [S - 1]
    elif S > 1 or fault == "empty_target":
        last = [S - 1, S - 2]  # S - 2 is -1 when S == 1: the one state read twice
    else:
        last = [0]
    ll = _lse([alpha[F - 1, s] for s in last])
    if fault == "log_zero" and ll <= neg / 2:
        return -ll, np.zeros((F, C))
    if ll == -np.inf:
        return np.inf, np.zeros((F, C))
    beta = np.full((F, S), neg)
    for s in last:
        beta[F - 1, s] = _lse([beta[F - 1, s], e[F - 1, s]])
    for t in range(F - 2, -1, -1):
        for s in range(S):
            terms = [beta[t + 1, s]]
            if s + 1 < S:
                terms.append(beta[t + 1, s + 1])
            if s + 2 < S and jump[s + 2]:
                terms.append(beta[t + 1, s + 2])
            beta[t, s] = _lse(terms) + e[t, s]
    # each state's share of the paths through it; alpha and beta both hold its score
    if fault == "nan_softmax":  # divided by the probability itself, in the input's dtype
        with np.errstate(divide="ignore", invalid="ignore", under="ignore"):
            mass = (np.exp((alpha + beta - ll).astype(dtype))
                    / np.exp(e.astype(dtype))).astype(np.float64)
    else:
        with np.errstate(invalid="ignore"):
            mass = np.where(np.isneginf(e), 0.0, np.exp(alpha + beta - e - ll))
    occupancy = np.zeros((F, C))
    for s, k in enumerate(states):
        occupancy[:, k] += mass[:, s]
    if fault in ("logits", "grad_log_probs"):
        grad = -occupancy  # d loss / d scores
    elif fault == "probs":
        p = scores  # d/dx p_k = p_k (delta - p_j)
        grad = -p * (occupancy - (p * occupancy).sum(axis=1, keepdims=True))
    else:
        grad = np.exp(scores) - occupancy
    return -ll, grad


def _ctc(logits, targets, input_lengths, target_lengths, blank, fault=None):
    x_all = np.asarray(logits, np.float64)  # (T, N, C)
    T, N, C = x_all.shape
    if fault == "blank_zero":
        blank = 0
    if fault == "blank_last":
        blank = C - 1
    loss, grad = np.zeros(N), np.zeros((T, N, C))
    for n in range(N):
        frames = int(input_lengths[n])
        if fault == "padded_frames":
            frames = T
        L = targets.shape[1] if fault == "past_length" else int(target_lengths[n])
        labels = [int(k) for k in targets[n, :L]]
        if frames == 0 and fault == "zero_length":
            frames = T  # the forward table of all T frames read at row frames - 1 = -1
        if frames == 0:
            loss[n] = 0.0 if not labels else np.inf
            continue
        loss[n], grad[:frames, n] = _one(x_all[:frames, n], labels, blank, fault, logits.dtype)
        if fault == "per_target":
            loss[n] /= max(int(target_lengths[n]), 1)
            grad[:, n] /= max(int(target_lengths[n]), 1)
        if fault == "per_input":
            loss[n] /= max(int(input_lengths[n]), 1)
            grad[:, n] /= max(int(input_lengths[n]), 1)
    if fault == "batch_sum":
        loss = np.full(N, loss.sum())
    return loss, grad


def ctc_loss(logits, targets, input_lengths, target_lengths, blank=0):
    return _ctc(logits, targets, input_lengths, target_lengths, blank)


def _planted(fault):
    def loss(logits, targets, input_lengths, target_lengths, blank=0):
        return _ctc(logits, targets, input_lengths, target_lengths, blank, fault)
    loss.__name__ = loss.__qualname__ = f"ctc_loss_{fault}"
    return loss


for _fault in FAULTS:
    globals()[f"ctc_loss_{_fault}"] = _planted(_fault)
