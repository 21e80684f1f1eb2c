"""ctcbench: benchmark, cross-check and debug CTC loss implementations.

Importing ctcbench imports NumPy only; torch and every other framework load when a backend
that needs them is asked for. The registry's names load on first use, so a worker process
(``ctcbench.runtime.worker``) never imports the registry.
"""
from ctcbench.doctor import Monitor, check_aligner, check_decoder, diagnose
from ctcbench.core.problem import CTCProblem
from ctcbench.core.reduction import reduce_loss
from ctcbench.runtime.protocol import (
    Backend,
    BackendCrashed,
    BackendFailure,
    BackendResult,
    BackendTimeout,
    BackendTraits,
    BackendUnavailable,
    UnsupportedProblem,
)

_REGISTRY_NAMES = ("BackendInfo", "LoadedBackend", "get_backend", "list_backends", "register",
                   "register_backend", "unregister_backend")  # from ctcbench.runtime.registry
_DECODER_NAMES = ("get_decoder", "register_decoder",
                  "unregister_decoder")  # from ctcbench.runtime.decoders
_TRANSFORMERS_NAMES = ("diagnose_batch",)  # from ctcbench.transformers (the extra)

__version__ = "0.1.0"

__all__ = [
    "Backend",
    "BackendCrashed",
    "BackendFailure",
    "BackendInfo",
    "BackendResult",
    "BackendTimeout",
    "BackendTraits",
    "BackendUnavailable",
    "CTCProblem",
    "LoadedBackend",
    "Monitor",
    "UnsupportedProblem",
    "check_aligner",
    "check_decoder",
    "diagnose",
    "diagnose_batch",
    "get_backend",
    "get_decoder",
    "list_backends",
    "reduce_loss",
    "register",
    "register_backend",
    "register_decoder",
    "unregister_backend",
    "unregister_decoder",
]


def __getattr__(name: str):
    if name in _REGISTRY_NAMES:
        from ctcbench.runtime import registry
        return getattr(registry, name)
    if name in _DECODER_NAMES:
        from ctcbench.runtime import decoders
        return getattr(decoders, name)
    if name in _TRANSFORMERS_NAMES:
        import ctcbench.transformers as transformers
        return getattr(transformers, name)
    raise AttributeError(f"module 'ctcbench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
