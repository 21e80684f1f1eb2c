"""How a user's CTC function is called in each convention (``function_backend.py``'s
``FunctionBackend`` picks one): each caller turns a ``Call`` (the problem, upstream weights,
keyword arguments, target layout) into the function's arguments, runs it and takes the
gradient w.r.t. the logits with the function's own framework."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctcbench.core.problem import CTCProblem
from ctcbench.errors import fail

class CallMismatch(ValueError):
    """What a function returned does not fit its convention (a tuple, a loss of another shape
    than ``(N,)``): ``what`` came back, and ``fix``, what to return instead."""

    def __init__(self, target: str, what: str, fix: str):
        super().__init__(f"{target} returned {what}: {fix}")
        self.what, self.fix = what, fix

    def __reduce__(self):  # raised in a worker process, it is pickled back to the parent
        return type(self), (str(self).partition(" returned ")[0], self.what, self.fix)


def kind_of(value) -> str:
    """What a function returned, in words: ``None`` (not Python's ``NoneType``), else its
    type's name."""
    return "None" if value is None else type(value).__name__


def shape_of(value) -> str:
    shape = getattr(value, "shape", None)
    return f"shape {tuple(shape)}" if shape is not None else kind_of(value)

@dataclass(frozen=True)
class Call:
    """One call's inputs: the problem, the upstream weights ``w (N,)``, the keyword arguments
    for the function, the targets' layout, whether ``reduction="none"`` is among them, and
    whether a torch-convention call hands probabilities (a probe's retry)."""

    problem: CTCProblem
    w: np.ndarray
    kwargs: dict
    layout: str
    reduced: bool
    probabilities: bool = False

    def targets(self) -> np.ndarray:
        """The targets in the call's layout and the case's index dtype."""
        p = self.problem
        targets = p.concatenated_targets() if self.layout == "concatenated" else p.targets
        return targets.astype(p.index_dtype)  # (N, S) or (sum S,)

    def lengths(self) -> tuple[np.ndarray, np.ndarray]:
        p = self.problem
        return p.input_lengths.astype(p.index_dtype), p.target_lengths.astype(p.index_dtype)


def as_dtype(logits: np.ndarray, dtype: str):
    """``logits`` in ``dtype``; bfloat16 as a torch tensor."""
    if dtype == "bfloat16":
        import torch
        return torch.from_numpy(logits).to(torch.bfloat16)
    return logits.astype(dtype)


class _Torch:
    """Autograd through ``log_softmax`` of the logits; the call on ``--device``."""

    def __init__(self, backend):
        import torch
        self.torch, self.backend = torch, backend
        if backend.device == "cuda" and not torch.cuda.is_available():
            fail("--device", "a CUDA device torch can use", "cuda (none here)")
        self.note = f"; on {backend.device}"

    def __call__(self, call: Call):
        torch, b, p = self.torch, self.backend, call.problem
        logits = torch.tensor(np.array(p.logits), device=b.device).to(
            getattr(torch, p.dtype)).requires_grad_()  # (T, N, C) as the case holds them
        log_probs = logits.log_softmax(-1)
        log_probs.retain_grad()
        scores = log_probs.exp() if call.probabilities else log_probs
        args = [torch.as_tensor(x, device=b.device) for x in (call.targets(), *call.lengths())]
        loss = b.checked_loss(b.fn(scores, *args, **call.kwargs), len(call.w), call.reduced)
        if not isinstance(loss, torch.Tensor):
            raise CallMismatch(b.target, kind_of(loss), "return a torch tensor, the "
                               "loss of the log-probs it was handed")
        if loss.requires_grad:
            (loss * torch.as_tensor(call.w, dtype=loss.dtype, device=loss.device)).sum().backward()
        zeros = torch.zeros_like(logits)
        valid = torch.as_tensor(p.frame_mask, device=b.device)[..., None]  # (T, N, 1)
        through = logits.grad if logits.grad is not None else zeros
        own = log_probs.grad if log_probs.grad is not None else zeros
        grad = torch.where(valid, through, own)  # padded frames: the function's own gradient
        return loss.detach().double().cpu().numpy(), grad.double().cpu().numpy()


class _Optax:
    """``jax.value_and_grad`` of the weighted sum, jitted where the function traces."""

    def __init__(self, backend):
        import jax
        jax.config.update("jax_enable_x64", True)
        self.jax, self.backend, self.jitted, self.steps = jax, backend, True, {}
        self.note = "; under jax.jit"

    def _step(self, call: Call, jitted: bool):
        """The loss and gradient of ``sum(w * loss)``, one per blank argument (jax.jit then
        compiles once per shape, as a user's jitted training step does)."""
        key = (tuple(sorted(call.kwargs.items())), jitted)
        if key not in self.steps:
            jax, b, kwargs = self.jax, self.backend, call.kwargs

            def total(logits, logit_pad, labels, label_pad, w):
                loss = b.checked_loss(b.fn(logits, logit_pad, labels, label_pad, **kwargs),
                                      logits.shape[0])  # (N,)
                return (loss * w).sum(), loss
            step = jax.value_and_grad(total, has_aux=True)
            self.steps[key] = jax.jit(step) if jitted else step
        return self.steps[key]

    def __call__(self, call: Call):
        jax, b, p = self.jax, self.backend, call.problem
        dtype = np.dtype(p.dtype)
        inputs, lengths = call.lengths()
        T, S = p.shape[0], p.targets.shape[1]
        args = (np.array(p.logits).transpose(1, 0, 2),  # (N, T, C) as the case holds them
                (np.arange(T)[None, :] >= inputs[:, None]).astype(dtype),  # (N, T) 1 = padding
                call.targets(),  # (N, S)
                (np.arange(S)[None, :] >= lengths[:, None]).astype(dtype),  # (N, S)
                call.w.astype(dtype))  # (N,)
        try:
            (_, loss), grad = self._step(call, self.jitted)(*args)
        except jax.errors.JAXTypeError as exc:  # it branches on values: no jit
            if not self.jitted:
                raise
            self.jitted, self.note = False, f"; not jitted ({type(exc).__name__})"
            b.notes = [n.replace("; under jax.jit", self.note) for n in b.notes]
            (_, loss), grad = self._step(call, False)(*args)
        return np.asarray(loss), np.asarray(grad).transpose(1, 0, 2)


class _Keras:
    """The gradient by the framework Keras runs on (JAX, TensorFlow or torch)."""

    def __init__(self, backend):
        import keras
        self.keras, self.backend = keras, backend
        self.framework = keras.backend.backend()
        self.note = f"; keras on {self.framework}"

    def __call__(self, call: Call):
        b, p, w = self.backend, call.problem, call.w
        inputs, lengths = call.lengths()
        logits = np.array(p.logits).transpose(1, 0, 2)  # (N, T, C) as the case holds them
        labels = call.targets()  # (N, S)

        def loss_of(x):
            return b.checked_loss(b.fn(labels, x, lengths, inputs, **call.kwargs), len(w))

        if self.framework == "jax":
            import jax

            def total(x):
                loss = loss_of(x)
                return (loss * w).sum(), loss
            (_, loss), grad = jax.value_and_grad(total, has_aux=True)(logits)
        elif self.framework == "tensorflow":
            import tensorflow as tf
            x = tf.Variable(logits)
            with tf.GradientTape() as tape:
                loss = loss_of(x)
                total = tf.reduce_sum(loss * tf.cast(w, loss.dtype))
            grad = tape.gradient(total, x)
            grad = np.zeros_like(logits) if grad is None else grad.numpy()
            loss = loss.numpy()
        else:
            import torch
            x = torch.tensor(logits, requires_grad=True)
            loss = loss_of(x)
            (loss * torch.as_tensor(w, dtype=loss.dtype)).sum().backward()
            grad = x.grad if x.grad is not None else torch.zeros_like(x)
            loss, grad = loss.detach().numpy(), grad.numpy()
        return np.asarray(loss), np.asarray(grad).transpose(1, 0, 2)


class _Numpy:
    """The function's own gradient, of ``loss.sum()``; weights scale each sample's slice."""

    note = ""

    def __init__(self, backend):
        self.backend = backend

    def __call__(self, call: Call):
        b, p = self.backend, call.problem
        out = b.fn(np.array(p.logits), call.targets(), *call.lengths(), **call.kwargs)
        if not (isinstance(out, tuple) and len(out) == 2):
            what = (f"a {type(out).__name__} of {len(out)}" if isinstance(out, (tuple, list))
                    else f"{kind_of(out)} ({shape_of(out)})")
            raise CallMismatch(b.target, what, "return (loss (N,), grad (T, N, C)), as the "
                               "numpy convention wants")
        loss = b.checked_loss(np.asarray(out[0], np.float64), len(call.w))
        grad = np.asarray(out[1], np.float64)
        return loss, grad * call.w[None, :, None] if grad.ndim == 3 else grad


CALLS = {"torch": _Torch, "optax": _Optax, "keras": _Keras, "numpy": _Numpy}
