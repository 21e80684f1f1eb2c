"""ctcbench: benchmark, cross-check and debug CTC loss implementations.

Importing ctcbench imports NumPy only; torch and every other framework load when a backend
that needs them is asked for.
"""
from ctcbench.doctor import diagnose
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
from ctcbench.runtime.registry import (
    BackendInfo,
    LoadedBackend,
    get_backend,
    list_backends,
    register,
    register_backend,
    unregister_backend,
)

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
    "UnsupportedProblem",
    "diagnose",
    "get_backend",
    "list_backends",
    "reduce_loss",
    "register",
    "register_backend",
    "unregister_backend",
]
