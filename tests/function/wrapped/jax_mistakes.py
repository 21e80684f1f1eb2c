"""A JAX CTC in optax's convention returning ``(loss, aux)``, as JAX code often does."""
import optax


def ctc_loss_with_aux(logits, logit_paddings, labels, label_paddings, blank_id=0):
    loss = optax.ctc_loss(logits, logit_paddings, labels, label_paddings, blank_id=blank_id)
    return loss, {"mean": loss.mean()}


def ctc_loss_of_log_probs(logits, logit_paddings, labels, label_paddings, blank_id=0):
    """Wants log-probabilities and checks it got them."""
    import jax.numpy as jnp
    if not bool(jnp.all(logits <= 0)):
        raise ValueError("logits: expected log-probabilities (<= 0)")
    return optax.ctc_loss(logits, logit_paddings, labels, label_paddings, blank_id=blank_id)
