"""Backend registry: one name -> factory table for built-ins and plugins alike.

What a backend is (``run`` and its optional traits) is stated in :mod:`ctcbench.runtime.protocol`.
Constructing a backend must be cheap and must raise :class:`BackendUnavailable` when it
cannot run here (package missing, no GPU). Third parties register a class or zero-argument
factory under the entry-point group ``ctcbench.backends`` (the entry point's name is the
backend's name) or at run time with :func:`register_backend`. Nothing is imported until a
backend is asked for. The table is a :class:`~ctcbench.runtime.table.Registry`, the design the
decoders' registry (``ctcbench.runtime.decoders``) shares.

A backend with ``isolated = True`` (the third-party frameworks) runs in a worker process,
see ``ctcbench.runtime.worker``; a crash or hang there raises :class:`BackendCrashed` or
:class:`BackendTimeout` for that problem only.
"""
from __future__ import annotations

import functools

import importlib.metadata
import types
import warnings
from dataclasses import dataclass

from ctcbench.runtime.protocol import (
    BackendResult,
    BackendTraits,
    BackendUnavailable,
    RawOutcome,
    UnsupportedProblem,
    as_result,
    call_raw,
    grad_weights_array,
)
from ctcbench.runtime.table import Registry

ENTRY_POINT_GROUP = "ctcbench.backends"

# name -> "module:attribute" (a class or zero-argument factory). Built-ins go through the same
# path as plugins; entry points and register_backend() add to it (LOSSES).
BUILTIN_BACKENDS: dict[str, str] = {
    "numpy": "ctcbench.backends.numpy_ref:NumpyBackend",
    "numba": "ctcbench.backends.numba.backend:NumbaBackend",
    "torch": "ctcbench.backends.torch_native:TorchBackend",
    "torch-cuda": "ctcbench.backends.torch_native:TorchCudaBackend",
    "torch-cudnn": "ctcbench.backends.torch_native:TorchCudnnBackend",
    "numba-cuda": "ctcbench.backends.numba.cuda:NumbaCudaBackend",  # our own CUDA kernel
    # Third-party frameworks, each isolated in its own worker process (ctcbench.runtime.worker).
    "optax": "ctcbench.backends.optax_ctc:OptaxBackend",
    "tf": "ctcbench.backends.tf_ctc:TFBackend",
    "tf-dense": "ctcbench.backends.tf_ctc:TFDenseBackend",
    "warpctc": "ctcbench.backends.paddle_warpctc:WarpctcBackend",
    # Keras 3's keras.ops.ctc_loss, one worker per KERAS_BACKEND (read once, at import)
    "keras-jax": "ctcbench.backends.keras_ctc:KerasJaxBackend",
    "keras-tf": "ctcbench.backends.keras_ctc:KerasTFBackend",
    "keras-torch": "ctcbench.backends.keras_ctc:KerasTorchBackend",
    "tf-seq2seq": "ctcbench.backends.tf_seq2seq:TFSeq2SeqBackend",
    "mindspore": "ctcbench.backends.mindspore_ctc:MindSporeBackend",
}

REFERENCE = "numpy"  # the exact float64 reference: compare, fuzz and the oracles check against it
FAST_ORACLE = "numba"  # exact against REFERENCE (its own tests, fuzzed clean), fast at any size

LOSSES = Registry("backend", BUILTIN_BACKENDS, ENTRY_POINT_GROUP, BackendTraits)


def register_backend(name: str, factory, *, replace: bool = False) -> None:
    """Register ``factory`` (a class, a zero-argument function, or a ``"module:attr"`` path)
    as the backend ``name``; a name already known is a ValueError unless ``replace``.

    To run isolated, the factory must be importable in a worker process: a module-level
    class or function, or a ``"module:attr"`` string.
    """
    LOSSES.register(name, factory, replace=replace)


def unregister_backend(name: str) -> None:
    """Remove the backend ``name``: one added by :func:`register_backend` is forgotten, a
    built-in or entry-point one is hidden until a backend is registered under its name
    again. An unknown name is a KeyError naming it and the known ones."""
    LOSSES.unregister(name)


def register(name: str, factory, *, overwrite: bool = False) -> None:
    """Deprecated alias of :func:`register_backend` (``overwrite`` is now ``replace``)."""
    warnings.warn("ctcbench.register is deprecated; use ctcbench.register_backend",
                  DeprecationWarning, stacklevel=2)
    register_backend(name, factory, replace=overwrite)


def backend_names() -> list[str]:
    return LOSSES.names()


def check_backend_names(names, option: str = "backend") -> None:
    """An UnknownName (a KeyError) naming ``option`` unless every one of ``names`` is
    registered, with a "did you mean" for a near miss: before any work starts."""
    LOSSES.check(names, option)


def get_backend(name: str, *, isolated: bool | None = None) -> "LoadedBackend":
    """Instantiate the backend called ``name``; raise ``BackendUnavailable`` if it cannot run.

    ``isolated``: run it in a worker process (``ctcbench.runtime.worker``). ``None`` follows the
    backend's own ``isolated`` trait (third-party frameworks set it); ``False`` forces
    the in-process path, ``True`` isolates any backend.
    """
    return LoadedBackend(name, *LOSSES.build(name, isolated=isolated))


def backend_spec(name: str) -> str:
    """``"module:attr"`` from which another process (a worker, a Dask worker) can build the
    backend ``name`` as it is registered here; a ValueError when it has none."""
    return LOSSES.spec(name)


class LoadedBackend:
    """A registered backend, built: its ``name``, the adapter object ``impl`` as its factory
    made it in this process, its ``traits`` (:class:`BackendTraits`), and ``worker``, the
    :class:`~ctcbench.runtime.worker.IsolatedBackend` that runs it in a worker process (``None`` when
    it runs here). ``run`` always returns a checked float64 :class:`BackendResult`.
    """

    def __init__(self, name: str, impl, traits: BackendTraits, worker=None):
        self.name = name
        self.impl = impl
        self.traits = traits
        self.worker = worker

    @property
    def isolated(self) -> bool:
        """Whether ``run`` goes to a worker process (``get_backend(isolated=...)`` may have
        overridden ``traits.isolated``)."""
        return self.worker is not None

    @property
    def worker_pid(self) -> int | None:
        """The live worker's process id; ``None`` in-process or while no worker runs."""
        return self.worker.worker_pid if self.worker is not None else None

    def run(self, problem, *, grad_weights=None, timeout_s: float | None = None) -> BackendResult:
        """``grad_weights (N,)``: the upstream gradient of each loss, checked here; a backend
        whose ``run`` takes no ``grad_weights`` raises UnsupportedProblem for it. ``timeout_s``:
        through the worker, the most this call may take (default the backend's trait; past
        it BackendTimeout); in this process it is not enforced."""
        from ctcbench.core.problem import CTCProblem
        if not isinstance(problem, CTCProblem):
            raise TypeError(f"problem: expected a ctcbench.CTCProblem (build one with "
                            f"CTCProblem(logits, targets, input_lengths, target_lengths)), "
                            f"got {type(problem).__name__}")
        if self.worker is not None:
            run = functools.partial(self.worker.run, timeout_s=timeout_s)
        else:
            run = self.impl.run
        if grad_weights is None:
            return as_result(run(problem), problem)
        weights = grad_weights_array(grad_weights, problem.shape[1])
        if not self.traits.takes_grad_weights:
            raise UnsupportedProblem(f"{self.name}: run() takes no grad_weights (upstream gradient)")
        return as_result(run(problem, grad_weights=weights), problem)

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank: int = 0,
                timeout_s: float | None = None) -> RawOutcome:
        """The framework's own CTC call on the arrays exactly as given (see
        ``BackendTraits.has_raw_ctc``), classified as a :class:`RawOutcome`; UnsupportedProblem
        where the backend has no ``raw_ctc`` or its API cannot express the input. Through the
        worker when isolated (a crash raises BackendCrashed, a hang past ``timeout_s``,
        default the trait, BackendTimeout); in this process otherwise, where a crash takes the
        process and ``timeout_s`` is not enforced: malformed input belongs in a worker
        (``get_backend(name, isolated=True)``)."""
        if self.worker is not None:
            return self.worker.raw_ctc(logits, targets, input_lengths, target_lengths,
                                       blank=blank, timeout_s=timeout_s)
        return call_raw(self.impl, logits, targets, input_lengths, target_lengths,
                        blank=int(blank), name=self.name)

    def close(self) -> None:
        """Stop the worker process, if any (a later ``run`` starts a new one)."""
        if self.worker is not None:
            self.worker.close()

    def __repr__(self) -> str:
        where = ", isolated" if self.isolated else ""
        return f"<LoadedBackend {self.name!r}: {type(self.impl).__name__}{where}>"


@dataclass
class BackendInfo:
    name: str
    available: bool
    reason: str | None = None
    hint: str | None = None
    source: str = "builtin"
    nondeterministic: float | None = None  # the trait: how far two calls may differ; None: not at all


def list_backends() -> list[BackendInfo]:
    """Every known backend, whether it can run here and, if not, why and how to fix it."""
    infos = []
    for name in backend_names():
        source = LOSSES.source(name)
        try:
            backend = get_backend(name)
        except BackendUnavailable as exc:
            infos.append(BackendInfo(name, False, exc.reason, exc.hint, source))
        except Exception as exc:  # a broken plugin must not hide the others
            infos.append(BackendInfo(name, False, f"failed to load: {type(exc).__name__}: {exc}",
                                     None, source))
        else:
            infos.append(BackendInfo(name, True, source=source,
                                     nondeterministic=backend.traits.nondeterministic))
    return infos


def backend_versions(backends) -> dict:
    """name -> {distribution: version} of each ``LoadedBackend``'s libraries: the package
    holding its implementation, the modules it holds on to (e.g. ``self.torch``) and any
    names in its ``packages`` trait."""
    dists = importlib.metadata.packages_distributions()
    out = {}
    for b in backends:
        tops = {type(b.impl).__module__.split(".")[0]}
        tops |= {v.__name__.split(".")[0] for v in vars(b.impl).values()
                 if isinstance(v, types.ModuleType)} if hasattr(b.impl, "__dict__") else set()
        tops |= set(b.traits.packages)
        out[b.name] = {}
        for top in sorted(tops):
            for d in dists.get(top, [top]):
                try:
                    out[b.name][d] = importlib.metadata.version(d)
                except importlib.metadata.PackageNotFoundError:
                    pass
    return out
