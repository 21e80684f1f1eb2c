"""keras-jax, keras-tf and keras-torch (keras.ops.ctc_loss) against brute force and the
float64 reference, each in its own worker process with its KERAS_BACKEND."""
from __future__ import annotations

import sys
import types

import numpy as np
import pytest

from conftest import random_problem
from ctcbench import BackendUnavailable, CTCProblem, get_backend
from ctcbench.backends.keras_ctc import import_keras
from ctcbench.core import oracles

KERAS = ("keras-jax", "keras-tf", "keras-torch")


pytestmark = pytest.mark.usefixtures("one_thread")  # workers on one thread each


@pytest.fixture(scope="module")
def backends():
    """Each Keras backend that can run here, started once for the module."""
    loaded = {}
    for name in KERAS:
        try:
            loaded[name] = get_backend(name)
        except BackendUnavailable:
            pass
    yield loaded
    for backend in loaded.values():
        backend.close()


def backend_or_skip(backends, name):
    if name not in backends:
        pytest.skip(f"needs backend {name} (pip install 'ctcbench[keras]' and its framework)")
    return backends[name]


def tiny_problem(rng, blank):
    """A float32 batch of 3 with one empty target, ragged lengths and NaN padding."""
    base = random_problem(rng, T=6, N=3, C=4, L=2, blank=blank, dtype=np.float32)
    labels = [c for c in range(4) if c != blank]
    targets = np.array([[labels[0], labels[0]], [labels[1], labels[2]], [0, 0]])
    logits = np.nan_to_num(base.logits, nan=0.0).astype(np.float32)
    logits[5:, 1] = np.nan  # sample 1 has 5 frames
    return CTCProblem(logits, targets, np.array([6, 5, 4]), np.array([2, 2, 0]), blank=blank)


@pytest.mark.parametrize("name", KERAS)
def test_matches_brute_force(rng, backends, name):
    """Loss and gradient w.r.t. the logits equal the enumeration of every path, both blanks;
    each worker runs keras on its own framework."""
    backend = backend_or_skip(backends, name)
    assert backend.isolated
    for blank in (0, 3):
        problem = tiny_problem(rng, blank)
        result = backend.run(problem, grad_weights=np.array([1.0, 2.0, 0.5]))
        assert result.compute_dtype == "float32"
        for n, w in enumerate((1.0, 2.0, 0.5)):
            T_n, L_n = problem.input_lengths[n], problem.target_lengths[n]
            loss, grad = oracles.brute_force(problem.logits[:T_n, n].astype(np.float64),
                                             problem.targets[n, :L_n], blank=blank)
            assert result.loss[n] == pytest.approx(loss, rel=2e-5), (blank, n)
            np.testing.assert_allclose(result.grad_logits[:T_n, n], w * grad, atol=5e-5)
            assert not result.grad_logits[T_n:, n].any()  # padded frames: no gradient


@pytest.mark.parametrize("name", KERAS)
def test_float64_is_refused(backends, name):
    """keras computes float64 logits in float32, so a float64 problem is unsupported."""
    backend = backend_or_skip(backends, name)
    assert backend.traits.dtypes == ("float32",)


def test_keras_jax_float32_loss_below_zero(backends):
    """keras-jax reproduces optax's negative float32 loss (keras-team/keras#23684)."""
    backend = backend_or_skip(backends, "keras-jax")
    path = [1, 1, 2, 2, 3, 3, 3, 3]  # logit 20 on one alignment of [1 2 3], 0 elsewhere
    logits = np.zeros((8, 1, 5), np.float32)
    logits[np.arange(8), 0, path] = 20.0
    want, _ = oracles.brute_force(logits[:, 0].astype(np.float64), [1, 2, 3])
    loss = backend.run(CTCProblem(logits, np.array([[1, 2, 3]]), [8], [3])).loss
    assert loss[0] < 0 < want  # -2.06e-8 with keras 3.15.1; the answer is 4.53e-8


def test_keras_imported_with_another_backend_is_refused(monkeypatch):
    """A process whose keras runs on another backend cannot switch: a clear refusal."""
    fake = types.SimpleNamespace(backend=types.SimpleNamespace(backend=lambda: "jax"))
    monkeypatch.setitem(sys.modules, "keras", fake)
    with pytest.raises(BackendUnavailable, match="already imported here with backend 'jax'"):
        import_keras("torch")


def test_missing_framework_gives_the_extras_to_install(monkeypatch):
    """With keras or its framework hidden, each backend is unavailable with the extras that
    bring both (keras-torch needs only keras: torch is a dependency)."""
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "keras" else real(name, *a))
    hints = {}
    for name in KERAS:
        with pytest.raises(BackendUnavailable) as err:
            get_backend(name)
        hints[name] = err.value.hint
    assert hints == {"keras-jax": "pip install 'ctcbench[keras,jax]'",
                     "keras-tf": "pip install 'ctcbench[keras,tf]'",
                     "keras-torch": "pip install 'ctcbench[keras]'"}
