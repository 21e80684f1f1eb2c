"""A user's own CTC function as a backend: ``ctcbench compare --function PKG.MOD:NAME``.

The function is imported in its worker process only (``isolated``: a segfault costs the
worker), called in one of four conventions, and its gradient taken by its framework:

- ``torch``: ``f(log_probs (T, N, C), targets (N, S), input_lengths (N,), target_lengths (N,),
  blank=, reduction="none")`` -> loss ``(N,)``, as ``torch.nn.functional.ctc_loss``; the
  log-probs are ``log_softmax(logits)`` and the gradient is autograd's, w.r.t. the logits;
- ``optax``: ``f(logits (N, T, C), logit_paddings (N, T), labels (N, S), label_paddings
  (N, S), blank_id=)`` -> loss ``(N,)``, as ``optax.ctc_loss``; the gradient by ``jax.grad``,
  under ``jax.jit`` where the function traces (said in the notes);
- ``keras``: ``f(target (N, S), output (N, T, C) logits, target_length, output_length,
  mask_index=)`` -> loss ``(N,)``, as ``keras.ops.ctc_loss``, on the installed Keras backend;
- ``numpy``: ``f(logits (T, N, C), targets (N, S), input_lengths, target_lengths, blank=)``
  -> ``(loss (N,), grad (T, N, C))``, the gradient of ``loss.sum()`` w.r.t. the logits.

The convention is read from the names of the first four parameters where they are those of
the library named; a function whose parameters do not say is called in ``convention``. A ``blank``
argument the function lacks means it handles blank 0 only; a ``reduction`` one is passed
``"none"``. Padded frames hold logit 0. When the worker starts, a two-frame problem probes
which dtypes the function computes in and, for torch, whether it takes padded or
concatenated targets; every result's first note says what was found.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
from dataclasses import dataclass

import numpy as np

from ctcbench.core.problem import FLOAT_DTYPES, CTCProblem
from ctcbench.errors import InputError, fail
from ctcbench.runtime.protocol import BackendResult, UnsupportedProblem

OPTION = "--function"


@dataclass(frozen=True)
class Convention:
    """A calling convention: the parameter names that identify it, what it imports, the
    name of its blank argument, and the extra that installs its framework."""

    name: str
    params: tuple[str, ...]
    blank: str
    needs: tuple[str, ...]
    extra: str


CONVENTIONS = {c.name: c for c in (
    Convention("torch", ("log_probs", "targets", "input_lengths", "target_lengths"), "blank",
               ("torch",), "torch"),
    Convention("optax", ("logits", "logit_paddings", "labels", "label_paddings"), "blank_id",
               ("jax",), "jax"),
    Convention("keras", ("target", "output", "target_length", "output_length"), "mask_index",
               ("keras",), "keras"),
    Convention("numpy", ("logits", "targets", "input_lengths", "target_lengths"), "blank",
               ("numpy",), "numpy"),
)}
READ_OFF = ("torch", "optax", "keras")  # recognised by parameter names; numpy must be named


def parameters(fn) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: the caller names it
        return []


def convention_of(fn, asked: str | None, target: str) -> Convention:
    """The convention ``fn``'s parameter names state, else the one ``asked`` for (so one
    ``--convention`` serves the functions whose parameters do not say)."""
    names = parameters(fn)
    for name in READ_OFF:
        if tuple(names[:4]) == CONVENTIONS[name].params:
            return CONVENTIONS[name]
    if asked is not None:
        return CONVENTIONS[asked]
    fail("--convention", f"one of {', '.join(CONVENTIONS)}: {target}'s parameters "
         f"({', '.join(names) or 'unknown'}) are not those of torch's, optax's or keras' "
         f"ctc_loss", "none")


def load_function(target: str):
    """The callable at ``"pkg.mod:name"`` (a dotted name after the colon reaches into a class)."""
    module, _, attr = target.partition(":")
    try:
        obj = importlib.import_module(module)
    except ImportError as exc:
        fail(OPTION, f"an importable module {module!r}", f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # the module itself raised on import
        fail(OPTION, f"a module {module!r} that imports", f"{type(exc).__name__}: {exc}")
    for part in attr.split("."):
        if not hasattr(obj, part):
            fail(OPTION, f"a name {attr!r} in {module}", f"none (it has "
                 f"{', '.join(n for n in dir(obj) if not n.startswith('_'))[:200] or 'nothing'})")
        obj = getattr(obj, part)
    if not callable(obj):
        fail(OPTION, "a callable CTC function", f"{target} = {type(obj).__name__}")
    return obj


class FunctionBackend:
    """``target``'s function in ``convention`` (``None``: read off its parameters) on
    ``device`` (torch's; ``"cpu"`` or ``"cuda"``); ``known_issues``: its implementer's."""

    isolated = True

    def __init__(self, target: str, convention: str | None = None, device: str = "cpu",
                 known_issues: dict | None = None):
        self.target, self.asked, self.device = target, convention, device
        self.known_issues = dict(known_issues or {})  # "case/dtype" glob -> reason
        self.fn = self.convention = None
        self.dtypes_found, self.layout, self.notes = (), "padded", []

    # -- in the worker --------------------------------------------------------------------
    def prepare(self) -> None:
        """Import the function and its framework, then probe it on a two-frame problem."""
        self.fn = load_function(self.target)
        self.convention = c = convention_of(self.fn, self.asked, self.target)
        missing = [m for m in c.needs if importlib.util.find_spec(m) is None]
        if missing:
            fail(OPTION, f"{c.name}'s framework installed for {self.target}",
                 f"{', '.join(missing)} missing (pip install 'ctcbench[{c.extra}]')")
        self.params = parameters(self.fn)
        self.call = _CALLS[c.name](self)
        read = ("read off its parameters" if c.name in READ_OFF
                and tuple(parameters(self.fn)[:4]) == c.params else "named by --convention")
        self.dtypes_found = self._probe()
        self.notes = [f"{self.target}: {c.name} convention ({read}); "
                      f"{'takes' if self._takes(c.blank) else 'no'} {c.blank} argument; "
                      f"targets {self.layout}; computes in {', '.join(self.dtypes_found)} "
                      f"(probed){self.call.note}"]

    def _takes(self, name: str) -> bool:
        return name in self.params or any(
            p.kind is p.VAR_KEYWORD for p in inspect.signature(self.fn).parameters.values())

    def _probe(self) -> tuple[str, ...]:
        """The dtypes a two-frame problem runs in, and (torch) the target layout it takes;
        an InputError naming ``--function`` with its first error when it runs in none."""
        logits = np.array([[[0.5, -0.2, 0.1]], [[0.3, 0.2, -0.4]]])  # (T=2, N=1, C=3)
        first = None
        found = []
        layouts = ("padded", "concatenated") if self.convention.name == "torch" else ("padded",)
        for dtype in FLOAT_DTYPES:
            if dtype == "bfloat16" and self.convention.name != "torch":
                continue  # NumPy has none, so only a torch tensor can carry it
            problem = CTCProblem(_as(logits, dtype), [[1]], [2], [1])
            for layout in layouts:
                self.layout = layout
                try:
                    self._run(problem, None)
                except InputError:
                    raise
                except Exception as exc:
                    first = first or f"{dtype}, targets {layout}: {type(exc).__name__}: {exc}"
                    continue
                found.append(dtype)
                layouts = (layout,)  # the first layout it took, for every later call
                break
        if not found:
            fail(OPTION, f"a CTC function that runs in the {self.convention.name} convention "
                 "on a two-frame problem", f"{first}"[:600])
        return tuple(found)

    def run(self, problem: CTCProblem, *, grad_weights=None) -> BackendResult:
        if self.fn is None:
            self.prepare()
        if problem.dtype == "bfloat16" and self.convention.name != "torch":
            raise UnsupportedProblem(f"the {self.convention.name} convention has no bfloat16 "
                                     f"(NumPy has none)")
        if problem.dtype not in self.dtypes_found:
            raise UnsupportedProblem(f"{self.target} did not run in {problem.dtype} when "
                                     f"probed (it ran in {', '.join(self.dtypes_found)})")
        if problem.blank % problem.shape[2] != 0 and not self._takes(self.convention.blank):
            raise UnsupportedProblem(f"{self.target} takes no {self.convention.blank} "
                                     f"argument, so it is tried on blank 0 only")
        loss, grad = self._run(problem, grad_weights)
        return BackendResult(loss, grad, compute_dtype=problem.dtype, notes=list(self.notes))

    def _run(self, problem: CTCProblem, grad_weights) -> tuple[np.ndarray, np.ndarray]:
        T, N, C, _ = problem.shape
        w = np.ones(N) if grad_weights is None else np.asarray(grad_weights, np.float64)
        kwargs = {}
        if self._takes(self.convention.blank):
            kwargs[self.convention.blank] = problem.blank % C
        if self.convention.name == "torch" and self._takes("reduction"):
            kwargs["reduction"] = "none"
        loss, grad = self.call(problem, w, kwargs)
        loss, grad = np.asarray(loss, np.float64), np.asarray(grad, np.float64)
        if loss.shape != (N,):
            raise ValueError(f"{self.target} returned a loss of shape {loss.shape}, not "
                             f"(N,) = ({N},): one loss per sequence, no reduction")
        if grad.shape != (T, N, C):
            raise ValueError(f"{self.target}'s gradient has shape {grad.shape}, not "
                             f"(T, N, C) = {(T, N, C)}")
        return loss, grad


def _as(logits: np.ndarray, dtype: str):
    """``logits`` in ``dtype``; bfloat16 as a torch tensor."""
    if dtype == "bfloat16":
        import torch
        return torch.from_numpy(logits).to(torch.bfloat16)
    return logits.astype(dtype)


def _lengths(problem: CTCProblem):
    return problem.input_lengths.astype(np.int64), problem.target_lengths.astype(np.int64)


class _Torch:
    """Autograd through ``log_softmax`` of the logits; the call on ``--device``."""

    def __init__(self, backend: FunctionBackend):
        import torch
        self.torch, self.backend = torch, backend
        if backend.device == "cuda" and not torch.cuda.is_available():
            fail("--device", "a CUDA device torch can use", "cuda (none here)")
        self.note = f"; on {backend.device}"

    def __call__(self, problem, w, kwargs):
        torch, b = self.torch, self.backend
        held = "float32" if problem.dtype == "bfloat16" else problem.dtype  # NumPy's dtype
        logits = torch.tensor(problem.clean_logits(held), device=b.device).to(
            getattr(torch, problem.dtype)).requires_grad_()  # (T, N, C)
        targets = (problem.concatenated_targets() if b.layout == "concatenated"
                   else problem.targets)  # (sum L,) or (N, S)
        args = [torch.as_tensor(x.astype(np.int64), device=b.device)
                for x in (targets, *_lengths(problem))]
        loss = b.fn(logits.log_softmax(-1), *args, **kwargs)
        if not isinstance(loss, torch.Tensor):
            raise TypeError(f"{b.target} returned {type(loss).__name__}, not a torch tensor")
        if loss.requires_grad and loss.shape == (len(w),):
            (loss * torch.as_tensor(w, dtype=loss.dtype, device=loss.device)).sum().backward()
        grad = logits.grad if logits.grad is not None else torch.zeros_like(logits)
        return loss.detach().double().cpu().numpy(), grad.double().cpu().numpy()


class _Optax:
    """``jax.value_and_grad`` of the weighted sum, jitted where the function traces."""

    def __init__(self, backend: FunctionBackend):
        import jax
        jax.config.update("jax_enable_x64", True)
        self.jax, self.backend, self.jitted, self.steps = jax, backend, True, {}
        self.note = "; under jax.jit"

    def _step(self, kwargs: dict, jitted: bool):
        """The loss and gradient of ``sum(w * loss)``, one per blank argument (jax.jit then
        compiles once per shape, as a user's jitted training step does)."""
        key = (tuple(sorted(kwargs.items())), jitted)
        if key not in self.steps:
            jax, fn = self.jax, self.backend.fn

            def total(logits, logit_pad, labels, label_pad, w):
                loss = fn(logits, logit_pad, labels, label_pad, **kwargs)  # (N,)
                return (loss * w).sum(), loss
            step = jax.value_and_grad(total, has_aux=True)
            self.steps[key] = jax.jit(step) if jitted else step
        return self.steps[key]

    def __call__(self, problem, w, kwargs):
        jax, b = self.jax, self.backend
        dtype = np.dtype(problem.dtype)
        inputs, lengths = _lengths(problem)
        T, S = problem.shape[0], problem.targets.shape[1]
        args = (problem.clean_logits(dtype).transpose(1, 0, 2),  # (N, T, C)
                (np.arange(T)[None, :] >= inputs[:, None]).astype(dtype),  # (N, T) 1 = padding
                problem.targets.astype(np.int32),  # (N, S)
                (np.arange(S)[None, :] >= lengths[:, None]).astype(dtype),  # (N, S)
                w.astype(dtype))  # (N,)
        try:
            (_, loss), grad = self._step(kwargs, self.jitted)(*args)
        except jax.errors.JAXTypeError as exc:  # it branches on values: no jit
            if not self.jitted:
                raise
            self.jitted, self.note = False, f"; not jitted ({type(exc).__name__})"
            b.notes = [n.replace("; under jax.jit", self.note) for n in b.notes]
            (_, loss), grad = self._step(kwargs, False)(*args)
        return np.asarray(loss), np.asarray(grad).transpose(1, 0, 2)


class _Keras:
    """The gradient by the framework Keras runs on (JAX, TensorFlow or torch)."""

    def __init__(self, backend: FunctionBackend):
        import keras
        self.keras, self.backend = keras, backend
        self.framework = keras.backend.backend()
        self.note = f"; keras on {self.framework}"

    def __call__(self, problem, w, kwargs):
        b, dtype = self.backend, np.dtype(problem.dtype)
        inputs, lengths = _lengths(problem)
        logits = problem.clean_logits(dtype).transpose(1, 0, 2)  # (N, T, C)
        labels = problem.targets.astype(np.int64)  # (N, S)

        def loss_of(x):
            return b.fn(labels, x, lengths, inputs, **kwargs)  # (N,)

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

    def __init__(self, backend: FunctionBackend):
        self.backend = backend

    def __call__(self, problem, w, kwargs):
        out = self.backend.fn(problem.clean_logits(problem.dtype), problem.targets.copy(),
                              *_lengths(problem), **kwargs)
        if not (isinstance(out, tuple) and len(out) == 2):
            raise TypeError(f"{self.backend.target} returned {type(out).__name__}, not "
                            f"(loss (N,), grad (T, N, C)) as the numpy convention wants")
        loss, grad = (np.asarray(x, np.float64) for x in out)
        return loss, grad * w[None, :, None] if grad.ndim == 3 else grad


_CALLS = {"torch": _Torch, "optax": _Optax, "keras": _Keras, "numpy": _Numpy}
