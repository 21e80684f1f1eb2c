"""A CTC loss as an implementer writes one in JAX: log-space alpha recursion under
``lax.scan``, batched, ``jax.grad`` for the gradient; optax's calling convention.

``ctc_loss`` is right; ``ctc_loss_skips_repeats`` has one planted bug: a path may skip the
blank between two equal labels.
"""
import jax
import jax.numpy as jnp

NEG = -1e30  # log(0) kept finite: -inf in a logsumexp gives a NaN gradient


def _shifted(alpha, k):
    pad = jnp.full((alpha.shape[0], k), NEG, alpha.dtype)
    return jnp.concatenate([pad, alpha], 1)[:, :alpha.shape[1]]


def _ctc(logits, logit_paddings, labels, label_paddings, blank_id, repeat_rule):
    N, T, C = logits.shape
    S = labels.shape[1]
    lens = jnp.round((1 - logit_paddings).sum(1)).astype(jnp.int32)  # (N,)
    tl = jnp.round((1 - label_paddings).sum(1)).astype(jnp.int32)  # (N,)
    empty = jnp.where(tl == 0, 0.0, jnp.inf)
    if T == 0:
        return empty.astype(logits.dtype)
    # padded frames given 0 before log_softmax: its backward through a NaN frame is NaN
    x = jnp.where(logit_paddings[..., None] > 0, 0.0, logits.astype(jnp.float64))
    lp = jax.nn.log_softmax(x, axis=-1)  # (N, T, C)
    lab = jnp.where(jnp.arange(S) < tl[:, None], labels, blank_id)
    ext = jnp.full((N, 2 * S + 1), blank_id, labels.dtype).at[:, 1::2].set(lab)
    skip = jnp.zeros(ext.shape, bool).at[:, 2:].set(ext[:, 2:] != blank_id)
    if repeat_rule:
        skip = skip.at[:, 2:].set(skip[:, 2:] & (ext[:, 2:] != ext[:, :-2]))
    emit = jnp.take_along_axis(lp, jnp.broadcast_to(ext[:, None, :], (N, T, ext.shape[1])), 2)
    alpha = jnp.full(ext.shape, NEG, jnp.float64).at[:, :2].set(emit[:, 0, :2])

    def step(alpha, xs):
        e_t, t = xs
        two = jnp.where(skip, _shifted(alpha, 2), NEG)
        new = jax.nn.logsumexp(jnp.stack([alpha, _shifted(alpha, 1), two]), 0) + e_t
        return jnp.where((t < lens)[:, None], new, alpha), None

    alpha, _ = jax.lax.scan(step, alpha, (emit[:, 1:].transpose(1, 0, 2), jnp.arange(1, T)))
    last = 2 * tl[:, None]
    ends = jnp.concatenate([jnp.take_along_axis(alpha, last, 1),
                            jnp.where(last > 0, jnp.take_along_axis(
                                alpha, jnp.maximum(last - 1, 0), 1), NEG)], 1)
    loss = -jax.nn.logsumexp(ends, 1)
    loss = jnp.where(lens == 0, empty, jnp.where(loss > 1e25, jnp.inf, loss))
    return loss.astype(logits.dtype)


def ctc_loss(logits, logit_paddings, labels, label_paddings, blank_id=0):
    return _ctc(logits, logit_paddings, labels, label_paddings, blank_id, repeat_rule=True)


def ctc_loss_skips_repeats(logits, logit_paddings, labels, label_paddings, blank_id=0):
    return _ctc(logits, logit_paddings, labels, label_paddings, blank_id, repeat_rule=False)
