"""Backend registry: one name -> factory table for built-ins and plugins alike.

A backend is any object with ``run(problem) -> result`` where ``result`` has
  loss:        ``(N,)`` per-sequence loss (``+inf`` where the target is infeasible);
  grad_logits: ``(T, N, C)`` gradient of the sum of the finite losses w.r.t. the logits,
               zero on padded frames and for infeasible samples.
A backend may also accept ``run(problem, *, grad_weights=w)``, ``w (N,)`` the upstream
gradient of each loss (e.g. a reduction's weights); it then returns the gradient of
``sum(w * loss)``. Drivers test this only where ``run`` declares the keyword; ``w`` is
checked by :func:`grad_weights_array` before a backend sees it.
Constructing a backend must be cheap and must raise :class:`BackendUnavailable` when it
cannot run here (package missing, no GPU). Third parties register a class or zero-argument
factory under the entry-point group ``ctcbench.backends``; the entry point's name is the
backend's name. Nothing is imported until a backend is asked for.

A backend with ``isolated = True`` (the third-party frameworks) runs in a worker process,
see ``ctcbench.worker``; a crash or hang there raises :class:`BackendCrashed` or
:class:`BackendTimeout` for that problem only. ``known_issues`` (``{"case/dtype" glob: why}``)
lists upstream bugs that ``compare`` records as ``known`` rather than failing.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass, field
from importlib.metadata import entry_points

import numpy as np

ENTRY_POINT_GROUP = "ctcbench.backends"


class BackendUnavailable(RuntimeError):
    """The backend cannot run here; ``reason`` says why and ``hint`` how to fix it."""

    def __init__(self, reason: str, hint: str | None = None):
        super().__init__(reason if hint is None else f"{reason} ({hint})")
        self.reason = reason
        self.hint = hint


class UnsupportedProblem(ValueError):
    """The backend runs here but cannot take this problem (a dtype, a layout, a size)."""


class BackendFailure(RuntimeError):
    """An isolated backend's worker process died or hung on one problem.

    ``status`` is the word a driver records for the case (``"crashed"`` or ``"timeout"``);
    the worker has been restarted when this is raised, so the run can go on.
    """

    status = "failed"


class BackendCrashed(BackendFailure):
    """The worker process died: ``signal`` (e.g. ``"SIGSEGV"``) or ``exitcode`` says how."""

    status = "crashed"

    def __init__(self, message: str, *, signal: str | None = None, exitcode: int | None = None):
        super().__init__(message)
        self.signal = signal
        self.exitcode = exitcode


class BackendTimeout(BackendFailure):
    """The worker did not answer within ``timeout_s`` seconds and was killed."""

    status = "timeout"

    def __init__(self, message: str, *, timeout_s: float):
        super().__init__(message)
        self.timeout_s = timeout_s


@dataclass
class BackendResult:
    """What a backend returns, normalised: float64 NumPy arrays plus what was really done."""

    loss: np.ndarray  # (N,) float64
    grad_logits: np.ndarray  # (T, N, C) float64
    compute_dtype: str | None = None  # the dtype the backend really computed in
    notes: list[str] = field(default_factory=list)
    raw: object = field(default=None, repr=False)  # what the backend returned, with any extras


# name -> "module:attribute" (a class or zero-argument factory). Built-ins go through the same
# path as plugins; entry points are merged in by _table().
BUILTIN_BACKENDS: dict[str, str] = {
    "numpy": "ctcbench.backends.numpy_ref:NumpyBackend",
    "numba": "ctcbench.backends.numba_ctc:NumbaBackend",
    "torch": "ctcbench.backends.torch_native:TorchBackend",
    "torch-cuda": "ctcbench.backends.torch_native:TorchCudaBackend",
    "torch-cudnn": "ctcbench.backends.torch_native:TorchCudnnBackend",
    # Third-party frameworks, each isolated in its own worker process (ctcbench.worker).
    "optax": "ctcbench.backends.optax_ctc:OptaxBackend",
    "tf": "ctcbench.backends.tf_ctc:TFBackend",
    "tf-dense": "ctcbench.backends.tf_ctc:TFDenseBackend",
    "warpctc": "ctcbench.backends.paddle_warpctc:WarpctcBackend",
}

_registered: dict[str, object] = {}  # name -> factory or "module:attr", set by register()


def register(name: str, factory, *, overwrite: bool = False) -> None:
    """Register a backend factory (or ``"module:attr"`` path) under ``name`` at run time."""
    if not overwrite and name in _table():
        raise ValueError(f"name: backend {name!r} is already registered")
    _registered[name] = factory


def _table() -> dict[str, object]:
    table: dict[str, object] = dict(BUILTIN_BACKENDS)
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        table.setdefault(ep.name, ep)
    table.update(_registered)
    return table


def _load_factory(target):
    if isinstance(target, str):
        module, _, attr = target.partition(":")
        return getattr(importlib.import_module(module), attr)
    if hasattr(target, "load") and hasattr(target, "group"):  # an EntryPoint
        return target.load()
    return target


def backend_names() -> list[str]:
    return sorted(_table())


def get_backend(name: str, *, isolated: bool | None = None):
    """Instantiate the backend called ``name``; raise ``BackendUnavailable`` if it cannot run.

    ``isolated``: run it in a worker process (``ctcbench.worker``). ``None`` follows the
    backend's own ``isolated`` attribute (third-party frameworks set it); ``False`` forces
    the in-process path, ``True`` isolates any backend.
    """
    table = _table()
    if name not in table:
        raise KeyError(f"unknown backend {name!r}; known backends: {', '.join(sorted(table))}")
    try:
        factory = _load_factory(table[name])
    except ImportError as exc:
        raise BackendUnavailable(f"cannot import backend {name!r}: {exc}") from None
    impl = factory()
    if isolated if isolated is not None else getattr(impl, "isolated", False):
        from ctcbench.worker import IsolatedBackend
        impl = IsolatedBackend(name, _spec(table[name], factory), impl)
    return Backend(name, impl)


def _spec(target, factory) -> str:
    """``"module:attr"`` a worker process can import to rebuild the backend."""
    if isinstance(target, str):
        return target
    if hasattr(target, "load") and hasattr(target, "group"):  # an EntryPoint
        return target.value
    module, qualname = getattr(factory, "__module__", None), getattr(factory, "__qualname__", "")
    if module is None or "<" in qualname or module == "__main__":
        raise ValueError(f"backend factory {factory!r}: expected an importable module-level class "
                         f"or function (or a 'module:attr' string) to run it isolated")
    return f"{module}:{qualname}"


class Backend:
    """A backend instance whose ``run`` always returns a checked float64 ``BackendResult``."""

    def __init__(self, name: str, impl):
        self.name = name
        self.impl = impl

    def run(self, problem, **kwargs) -> "BackendResult":
        """``kwargs`` go to the implementation (e.g. ``grad_weights`` where it takes them)."""
        if kwargs.get("grad_weights") is not None:
            kwargs["grad_weights"] = grad_weights_array(kwargs["grad_weights"], problem.shape[1])
        return as_result(self.impl.run(problem, **kwargs), problem)

    def __getattr__(self, attr):  # anything else a backend offers (e.g. posteriors)
        return getattr(self.impl, attr)

    def __repr__(self) -> str:
        return f"<Backend {self.name!r}: {type(self.impl).__name__}>"


@dataclass
class BackendInfo:
    name: str
    available: bool
    reason: str | None = None
    hint: str | None = None
    source: str = "builtin"


def list_backends() -> list[BackendInfo]:
    """Every known backend, whether it can run here and, if not, why and how to fix it."""
    infos = []
    for name in backend_names():
        source = "builtin" if name in BUILTIN_BACKENDS and name not in _registered else "plugin"
        try:
            get_backend(name)
        except BackendUnavailable as exc:
            infos.append(BackendInfo(name, False, exc.reason, exc.hint, source))
        except Exception as exc:  # a broken plugin must not hide the others
            infos.append(BackendInfo(name, False, f"failed to load: {type(exc).__name__}: {exc}",
                                     None, source))
        else:
            infos.append(BackendInfo(name, True, source=source))
    return infos


def as_result(raw, problem) -> BackendResult:
    """Check a backend's raw return value against the contract and normalise it."""
    T, N, C, _ = problem.shape
    for attr in ("loss", "grad_logits"):
        if not hasattr(raw, attr):
            raise TypeError(f"backend result: expected an object with .loss and .grad_logits, "
                            f"got {type(raw).__name__} without .{attr}")
    loss = np.asarray(_numpy(raw.loss), dtype=np.float64).reshape(-1)
    grad = np.asarray(_numpy(raw.grad_logits), dtype=np.float64)
    if loss.shape != (N,):
        raise ValueError(f"backend result loss: expected shape ({N},), got {loss.shape}")
    if grad.shape != (T, N, C):
        raise ValueError(f"backend result grad_logits: expected shape {(T, N, C)}, got {grad.shape}")
    return BackendResult(loss, grad, getattr(raw, "compute_dtype", None),
                         list(getattr(raw, "notes", []) or []), raw=raw)


def grad_weights_array(grad_weights, n: int) -> np.ndarray:
    """``grad_weights`` as the contract wants it: ``(N,)`` float64, one upstream gradient per
    loss; anything else is a ValueError saying what was expected."""
    expected = (f"grad_weights: expected shape ({n},) real numbers (one upstream gradient "
                "per sample)")
    try:
        w = np.asarray(_numpy(grad_weights))
    except (TypeError, ValueError) as exc:  # ragged lists and the like
        raise ValueError(f"{expected}, got {type(grad_weights).__name__} ({exc})") from None
    if w.shape != (n,) or w.dtype.kind not in "iuf":
        raise ValueError(f"{expected}, got shape {w.shape} of {w.dtype.name}")
    return w.astype(np.float64)


def _numpy(x):
    if hasattr(x, "detach"):
        x = x.detach().cpu()
        return x.float().numpy() if str(x.dtype) == "torch.bfloat16" else x.numpy()
    return x

