"""ctcbench: benchmark, cross-check and debug CTC loss implementations.

Importing ctcbench imports NumPy only; torch and every other framework load when a backend
that needs them is asked for.
"""
from ctcbench.doctor import diagnose
from ctcbench.problem import CTCProblem
from ctcbench.reduction import reduce_loss
from ctcbench.registry import (
    BackendInfo,
    BackendResult,
    BackendUnavailable,
    UnsupportedProblem,
    get_backend,
    list_backends,
    register,
)

__version__ = "0.1.0"

__all__ = [
    "BackendInfo",
    "BackendResult",
    "BackendUnavailable",
    "CTCProblem",
    "UnsupportedProblem",
    "diagnose",
    "get_backend",
    "list_backends",
    "reduce_loss",
    "register",
]
