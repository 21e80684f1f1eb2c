"""optax's CTC loss re-exported, as a JAX project does: ``from optax import ctc_loss``."""
from optax import ctc_loss  # noqa: F401  (the function under test)
