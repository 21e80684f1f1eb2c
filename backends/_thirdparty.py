"""What the third-party adapters share: availability without importing, and refusals.

Availability is decided with ``importlib.util.find_spec`` only, so ``ctcbench backends``
never imports JAX, TensorFlow or Paddle. Each refusal is an ``UnsupportedProblem`` whose
message says what the backend would have done instead, so a comparison records it.
"""
from __future__ import annotations

import importlib.util
import os

import numpy as np

from ctcbench.core.problem import CTCProblem
from ctcbench.runtime.protocol import BackendUnavailable, UnsupportedProblem
from ctcbench.runtime.threads import requested


def jax_threads() -> None:
    """Before JAX is imported: its CPU pools use the requested thread count, if any."""
    n = requested()
    if n is not None:
        os.environ.setdefault("XLA_FLAGS", "--xla_cpu_multi_thread_eigen=false "
                              f"intra_op_parallelism_threads={n}")


def import_tensorflow():
    """TensorFlow, imported quietly (no C++ info logs) on the requested thread count."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    import tensorflow as tf
    n = requested()
    if n is not None:
        tf.config.threading.set_intra_op_parallelism_threads(n)
        tf.config.threading.set_inter_op_parallelism_threads(n)
    return tf


def require(modules: tuple[str, ...], *, extra: str) -> None:
    """Raise ``BackendUnavailable`` naming the modules that are missing (only those) with the
    install hint of ``extra``, unless every one of ``modules`` is importable."""
    missing = [m for m in modules if importlib.util.find_spec(m) is None]
    if missing:
        verb = "is" if len(missing) == 1 else "are"
        raise BackendUnavailable(f"{' and '.join(missing)} {verb} not installed",
                                 f"pip install 'ctcbench[{extra}]'")


def check_dtype(problem: CTCProblem, name: str, dtypes: tuple[str, ...]) -> None:
    if problem.dtype not in dtypes:
        raise UnsupportedProblem(f"{name} computes in {'/'.join(dtypes)}, not {problem.dtype}")


def refuse_infeasible(problem: CTCProblem, name: str, instead: str) -> None:
    """Refuse a problem with a target longer than its input (the reference loss is inf)."""
    bad = np.flatnonzero(~problem.feasible())
    if len(bad):
        raise UnsupportedProblem(f"{name} cannot represent an infeasible target (samples "
                                 f"{bad[:5].tolist()}): {instead} instead of inf")


def refuse_neg_inf(problem: CTCProblem, name: str, instead: str) -> None:
    """Refuse logits of -inf (probability 0) in valid frames, which ``name`` gets wrong."""
    frames = problem.logits[problem.frame_mask]  # (valid frames, C)
    if np.isneginf(frames).any():
        raise UnsupportedProblem(f"{name} cannot take a logit of -inf (probability 0) in a valid "
                                 f"frame: {instead}")


def padded_labels(problem: CTCProblem) -> tuple[np.ndarray, np.ndarray]:
    """``(N, max(L, 1))`` int32 labels and ``(N, max(L, 1))`` bool mask of real labels."""
    N, L = problem.targets.shape
    labels = np.zeros((N, max(L, 1)), dtype=np.int32)  # some kernels reject a zero-width axis
    labels[:, :L] = problem.targets
    mask = np.arange(labels.shape[1])[None, :] < problem.target_lengths[:, None]  # (N, L')
    return labels, mask
