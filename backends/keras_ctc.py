"""Backends ``keras-jax``, ``keras-tf``, ``keras-torch``: Keras 3's ``keras.ops.ctc_loss``.

``keras.ops.ctc_loss(target, output, target_length, output_length, mask_index=0)`` takes
batch-major logits ``output (N, T, C)`` (log_softmax applied inside), padded int targets
``(N, L)`` with their lengths, and the blank as ``mask_index``; it returns the per-sequence
loss ``(N,)``. What runs depends on ``KERAS_BACKEND``, read once when keras is imported, so
each backend runs in its own worker process and sets it in ``prepare()`` before the import:

- ``keras-jax``: a copy of optax's recursion (log(0) scored as ``log_epsilon = -1e5``),
  jitted and padded to the same compilation buckets as ``optax``;
- ``keras-tf``: ``tf.nn.ctc_loss`` with dense labels, batch-major (TF's ``ctc_loss_dense``);
- ``keras-torch``: ``torch.nn.functional.ctc_loss(reduction="none")`` on log_softmax of the
  logits, without ``zero_infinity``.

All three compute in float32 only: keras casts the logits to
``backend.result_type(output.dtype, "float32")``, which is float32 for float64 logits on JAX
and torch, and its TF backend casts float64 to float32 explicitly; so float64 is refused.

The gradient is the framework's own autodiff of ``sum(w * loss)`` w.r.t. the logits.
Keras' NumPy backend computes the loss but has no gradient, so it is not a backend here.
"""
from __future__ import annotations

import os
import sys

import numpy as np

from ctcbench.core.problem import CTCProblem
from ctcbench.runtime.protocol import BackendResult, BackendUnavailable, UnsupportedProblem
from ctcbench.runtime.threads import requested

from ._thirdparty import (check_dtype, jax_threads, padded_labels, refuse_infeasible,
                          refuse_neg_inf, require)
from .optax_ctc import OptaxBackend
from .tf_ctc import TFDenseBackend


def import_keras(backend: str):
    """Import keras with ``KERAS_BACKEND=backend``; a process that already holds keras with
    another backend cannot switch (keras reads the variable once), so that is refused."""
    loaded = sys.modules.get("keras")
    if loaded is not None and loaded.backend.backend() != backend:
        raise BackendUnavailable(
            f"keras is already imported here with backend {loaded.backend.backend()!r}, "
            f"not {backend!r}", "run the backend isolated (its default)")
    os.environ["KERAS_BACKEND"] = backend
    import keras
    return keras


class KerasJaxBackend(OptaxBackend):
    """keras.ops.ctc_loss on JAX, under jax.jit; float32."""

    name = "keras-jax"
    dtypes = ("float32",)  # keras computes in float32 whatever the logits' dtype
    packages = ("keras", "jax", "jaxlib")
    _library = "keras' JAX ctc_loss (optax's recursion)"

    def __init__(self):
        require(("keras", "jax"), extra="keras,jax")
        self._fn = None

    def prepare(self) -> None:
        """Import keras on JAX; build the jitted loss-and-gradient."""
        jax_threads()
        import jax
        keras = import_keras("jax")

        def total(logits, logit_pad, labels, label_pad, weights, blank):
            output_length = (1 - logit_pad).sum(1).astype("int32")  # (N,)
            target_length = (1 - label_pad).sum(1).astype("int32")  # (N,)
            loss = keras.ops.ctc_loss(labels, logits, target_length, output_length,
                                      mask_index=blank)  # (N,)
            return (weights * loss).sum(), loss

        self._fn = jax.jit(jax.value_and_grad(total, has_aux=True), static_argnums=5)

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        """``keras.ops.ctc_loss(targets, logits batch-major, target_lengths, input_lengths,
        mask_index=blank)`` on JAX on the arrays as given (keras takes lengths, so any length
        can be said), not jitted; returns loss ``(N,)`` and the gradient of its sum w.r.t. the
        logits, in their ``(T, N, C)``."""
        if self._fn is None:
            self.prepare()
        import jax
        keras = import_keras("jax")  # imported by prepare(): the same module

        def total(x):
            loss = keras.ops.ctc_loss(targets, x, target_lengths, input_lengths,
                                      mask_index=blank)  # (N,)
            return loss.sum(), loss

        x = np.asarray(logits).transpose(1, 0, 2)  # (N, T, C)
        (_, loss), grad = jax.value_and_grad(total, has_aux=True)(x)
        return np.asarray(loss), np.asarray(grad).transpose(1, 0, 2)


class KerasTFBackend(TFDenseBackend):
    """keras.ops.ctc_loss on TensorFlow: TF's ctc_loss_dense, batch-major; float32 only."""

    name = "keras-tf"
    packages = ("keras", "tensorflow")
    dtypes = ("float32",)  # keras' TF backend casts float64 to float32 for tf.nn.ctc_loss

    def __init__(self):
        require(("keras", "tensorflow"), extra="keras,tf")
        self.tf = None

    def prepare(self) -> None:
        super().prepare()
        self.keras = import_keras("tensorflow")

    def _loss_and_grad(self, logits, labels, label_length, logit_length, weights, blank):
        tf = self.tf
        with tf.GradientTape() as tape:
            tape.watch(logits)
            output = tf.transpose(logits, (1, 0, 2))  # (N, T, C)
            loss = self.keras.ops.ctc_loss(labels, output, label_length, logit_length,
                                           mask_index=blank)  # (N,)
        return loss, tape.gradient(loss, logits, output_gradients=weights)


class KerasTorchBackend:
    """keras.ops.ctc_loss on torch (CPU): F.ctc_loss(reduction="none"); float32."""

    name = "keras-torch"
    clears_padded_frames = True  # its framework gets logit 0 there (clean_logits)
    isolated = True
    dtypes = ("float32",)  # keras computes in float32 whatever the logits' dtype
    packages = ("keras", "torch")

    def __init__(self):
        require(("keras", "torch"), extra="keras")
        self.keras = None

    def prepare(self) -> None:
        """Import keras on torch, on the CPU."""
        os.environ.setdefault("CUDA_VISIBLE_DEVICES", "")  # keras' torch backend takes a GPU
        import torch
        n = requested()
        if n is not None:
            torch.set_num_threads(n)
        self.torch = torch
        self.keras = import_keras("torch")

    def run(self, problem: CTCProblem, *, grad_weights=None) -> BackendResult:
        """``grad_weights (N,)``: upstream gradient per loss (default 1)."""
        check_dtype(problem, self.name, self.dtypes)
        refuse_neg_inf(problem, self.name, "torch's ctc_loss returns NaN gradients there")
        refuse_infeasible(problem, self.name, "keras passes torch no zero_infinity, so the "
                          "gradient of the infinite loss is NaN")
        T, N, C, _ = problem.shape
        if T == 0:
            raise UnsupportedProblem(f"{self.name}: torch's ctc_loss rejects T = 0 frames")
        if self.keras is None:
            self.prepare()
        torch = self.torch
        dtype = getattr(torch, problem.dtype)
        labels, _ = padded_labels(problem)  # (N, L')
        logits = torch.tensor(problem.clean_logits(np.dtype(problem.dtype)),
                              dtype=dtype, requires_grad=True)  # (T, N, C)
        loss = self.keras.ops.ctc_loss(
            torch.from_numpy(labels.astype(np.int64)), logits.transpose(0, 1),
            torch.from_numpy(problem.target_lengths.astype(np.int64)),
            torch.from_numpy(problem.input_lengths.astype(np.int64)),
            mask_index=problem.blank)  # (N,)
        w = np.ones(N) if grad_weights is None else np.asarray(grad_weights, np.float64)
        loss.backward(torch.as_tensor(w, dtype=loss.dtype))
        return BackendResult(loss.detach().double().numpy(), logits.grad.double().numpy(),
                             compute_dtype=str(loss.dtype).removeprefix("torch."))

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        """``keras.ops.ctc_loss(targets, logits batch-major, target_lengths, input_lengths,
        mask_index=blank)`` on torch tensors of the arrays as given, and the gradient of the
        loss's sum w.r.t. the logits ``(T, N, C)``; whatever keras or torch raises is raised."""
        if self.keras is None:
            self.prepare()
        torch = self.torch
        x = torch.from_numpy(np.array(logits)).requires_grad_()  # (T, N, C)
        loss = self.keras.ops.ctc_loss(
            torch.from_numpy(np.array(targets)), x.transpose(0, 1),
            torch.from_numpy(np.array(target_lengths)), torch.from_numpy(np.array(input_lengths)),
            mask_index=blank)  # (N,)
        loss.sum().backward()
        return loss.detach().numpy(), None if x.grad is None else x.grad.numpy()
