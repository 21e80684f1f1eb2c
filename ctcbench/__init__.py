"""ctcbench: benchmark, cross-check and debug CTC loss implementations.

Importing ctcbench imports NumPy only; torch and every other framework load when a backend
that needs them is asked for.
"""
from ctcbench.doctor import diagnose
from ctcbench.core.problem import CTCProblem
from ctcbench.core.reduction import reduce_loss
from ctcbench.registry import (
    BackendCrashed,
    BackendFailure,
    BackendInfo,
    BackendResult,
    BackendTimeout,
    BackendUnavailable,
    UnsupportedProblem,
    get_backend,
    list_backends,
    register,
)

__version__ = "0.1.0"

__all__ = [
    "BackendCrashed",
    "BackendFailure",
    "BackendInfo",
    "BackendResult",
    "BackendTimeout",
    "BackendUnavailable",
    "CTCProblem",
    "UnsupportedProblem",
    "diagnose",
    "get_backend",
    "list_backends",
    "reduce_loss",
    "register",
]
