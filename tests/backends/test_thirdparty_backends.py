"""optax, tf, tf-dense and warpctc adapters against brute force and the numpy reference.

Each backend's tests skip (with the install hint) when its extra is not installed. All
problems fit one optax compilation bucket, so each worker compiles once per dtype.
"""
from __future__ import annotations

import importlib.util
import json
import os

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import random_problem
from ctcbench import BackendUnavailable, CTCProblem, UnsupportedProblem, get_backend
from ctcbench.core import oracles
from ctcbench.cli import cli
from ctcbench.runtime.worker import IsolatedBackend

THIRD_PARTY = ("optax", "tf", "tf-dense", "warpctc")
EXTRAS = {"optax": "jax", "tf": "tf", "tf-dense": "tf", "warpctc": "paddle"}
DTYPES = {"optax": ("float32", "float64"), "tf": ("float32", "float64"),
          "tf-dense": ("float32",), "warpctc": ("float32", "float64")}
# Worst errors allowed against float64 answers. tf's float64 kernel adds log-probabilities in
# float32 (log1pf/expf), so its float64 is only good to ~1e-7.
TOL = {("tf", "float64"): (1e-6, 1e-6)}
DEFAULT_TOL = {"float32": (2e-5, 5e-5), "float64": (1e-10, 1e-10)}  # (loss rel, grad abs)


pytestmark = pytest.mark.usefixtures("one_thread")  # workers on one thread each


def backend_or_skip(name: str):
    try:
        return get_backend(name)
    except BackendUnavailable as exc:
        pytest.skip(f"needs backend {name}: {exc}")  # exc holds the install hint


def nonempty_problem(rng, *, T, N, C, L, blank=0, dtype=np.float64, min_frames=1):
    """A random feasible problem whose every target has at least one label and one frame
    (TF's C++ kernel rejects empty targets, warp-ctc empty inputs)."""
    base = random_problem(rng, T=T, N=N, C=C, L=L, blank=blank, dtype=dtype)
    labels = np.array([c for c in range(C) if c != blank])
    targets = base.targets.copy()
    target_lengths = np.maximum(base.target_lengths, 1)
    targets[:, 0] = np.where(base.target_lengths == 0, rng.choice(labels, size=N), targets[:, 0])
    input_lengths = np.maximum(base.input_lengths, np.maximum(min_frames, 1))
    logits = base.logits.copy()
    valid = np.arange(T)[:, None] < input_lengths[None, :]
    logits = np.where(valid[..., None], np.nan_to_num(logits, nan=0.5), np.nan).astype(dtype)
    return CTCProblem(logits, targets, input_lengths, target_lengths, blank=blank)


def tolerance(name: str, dtype: str):
    return TOL.get((name, dtype), DEFAULT_TOL[dtype])


@pytest.mark.parametrize("name", THIRD_PARTY)
def test_matches_brute_force_on_tiny_problems(rng, name):
    """Loss and gradient w.r.t. the logits equal the enumeration of every path, both dtypes."""
    backend = backend_or_skip(name)
    assert isinstance(backend.worker, IsolatedBackend)
    for dtype in DTYPES[name]:
        for blank in (0, 2):
            problem = nonempty_problem(rng, T=6, N=3, C=3, L=2, blank=blank, dtype=dtype)
            result = backend.run(problem)
            loss_tol, grad_tol = tolerance(name, dtype)
            for n in range(3):
                T_n, L_n = problem.input_lengths[n], problem.target_lengths[n]
                logits = problem.logits[:T_n, n].astype(np.float64)  # as rounded to dtype
                loss, grad = oracles.brute_force(logits, problem.targets[n, :L_n], blank=blank)
                assert result.loss[n] == pytest.approx(loss, rel=loss_tol), (dtype, blank, n)
                np.testing.assert_allclose(result.grad_logits[:T_n, n], grad, atol=grad_tol)
                assert not result.grad_logits[T_n:, n].any()  # padded (NaN) frames: no gradient


@pytest.mark.parametrize("name", THIRD_PARTY)
def test_matches_reference_on_ragged_batches(rng, name):
    """A ragged batch with repeats and NaN padding agrees with the float64 reference."""
    backend = backend_or_skip(name)
    ref = get_backend("numpy")
    for dtype in DTYPES[name]:
        problem = nonempty_problem(rng, T=16, N=4, C=7, L=4, blank=6, dtype=dtype)
        got, want = backend.run(problem), ref.run(problem)
        loss_tol, grad_tol = tolerance(name, dtype)
        np.testing.assert_allclose(got.loss, want.loss, rtol=loss_tol)
        np.testing.assert_allclose(got.grad_logits, want.grad_logits, atol=grad_tol)


@pytest.mark.parametrize("name", THIRD_PARTY)
def test_compute_dtype_is_what_ran(rng, name):
    """compute_dtype says what the backend computed in; tf's float64 says its sums are float32."""
    backend = backend_or_skip(name)
    for dtype in DTYPES[name]:
        result = backend.run(nonempty_problem(rng, T=4, N=2, C=3, L=1, dtype=dtype))
        if (name, dtype) == ("tf", "float64"):
            assert result.compute_dtype == "float64 (float32 log-sum-exp)"
            assert any("log1pf" in note for note in result.notes)
        else:
            assert result.compute_dtype == dtype


@pytest.mark.parametrize("name", THIRD_PARTY)
def test_upstream_gradient_scales_the_gradient(rng, name):
    """grad_weights w give the gradient of sum(w * loss): w times the brute-force gradient."""
    backend = backend_or_skip(name)
    problem = nonempty_problem(rng, T=5, N=3, C=3, L=2, dtype=DTYPES[name][-1])
    weights = np.array([3.0, -2.5, 0.0])
    result = backend.run(problem, grad_weights=weights)
    _, grad_tol = tolerance(name, DTYPES[name][-1])
    for n in range(3):
        T_n = problem.input_lengths[n]
        _, grad = oracles.brute_force(problem.logits[:T_n, n].astype(np.float64),
                                      problem.targets[n, : problem.target_lengths[n]])
        np.testing.assert_allclose(result.grad_logits[:T_n, n], weights[n] * grad,
                                   atol=4 * grad_tol)


@pytest.mark.parametrize("name", THIRD_PARTY)
def test_refusals_say_what_the_backend_would_do(name):
    """Infeasible targets and untaken dtypes are UnsupportedProblem with the reason, not a wrong row."""
    backend = backend_or_skip(name)
    infeasible = CTCProblem(np.zeros((4, 2, 3), np.float32), np.array([[1, 1, 2], [1, 1, 2]]),
                            [4, 2], [3, 2])
    with pytest.raises(UnsupportedProblem, match=r"infeasible target \(samples \[1\]\).*instead of inf"):
        backend.run(infeasible)
    with pytest.raises(UnsupportedProblem, match="not float16"):
        backend.run(CTCProblem(np.zeros((3, 1, 3), np.float16), [[1]], [3], [1]))
    assert backend.worker_pid is not None  # refusals do not cost the worker


KERNEL_LOSS = """
import sys
import numpy as np
from ctcbench import CTCProblem, get_backend
name, path, out = sys.argv[1:]
with np.load(path, allow_pickle=False) as f:
    problem = CTCProblem(f["logits"], f["targets"], f["input_lengths"], f["target_lengths"])
backend = get_backend(name, isolated=False)
loss = backend.impl.kernel(problem)()[0]
np.save(out, np.asarray(loss, dtype=np.float64))
"""


@pytest.mark.parametrize("name", ("optax", "tf"))
def test_kernel_that_bench_times_computes_the_loss(rng, tmp_path, name):
    """What `bench` times for optax and tf (their kernel(), in a process of its own) gives the
    per-sample losses of the enumeration of every path, in both dtypes."""
    import subprocess
    import sys
    backend_or_skip(name)
    for dtype in DTYPES[name]:
        problem = nonempty_problem(rng, T=6, N=3, C=4, L=2, dtype=dtype)
        np.savez(tmp_path / "p.npz", logits=problem.logits, targets=problem.targets,
                 input_lengths=problem.input_lengths, target_lengths=problem.target_lengths)
        done = subprocess.run([sys.executable, "-c", KERNEL_LOSS, name, str(tmp_path / "p.npz"),
                               str(tmp_path / "loss.npy")], capture_output=True, text=True,
                              timeout=300, env={**os.environ, "CTCBENCH_THREADS": "1"})
        assert done.returncode == 0, done.stderr[-2000:]
        got = np.load(tmp_path / "loss.npy", allow_pickle=False)
        for n in range(3):
            T_n, L_n = problem.input_lengths[n], problem.target_lengths[n]
            want, _ = oracles.brute_force(problem.logits[:T_n, n].astype(np.float64),
                                          problem.targets[n, :L_n])
            assert got[n] == pytest.approx(want, rel=tolerance(name, dtype)[0]), (dtype, n)


def test_tf_kernel_refuses_empty_targets():
    """TF's C++ kernel raises on an empty target: the adapter says so instead."""
    backend = backend_or_skip("tf")
    problem = CTCProblem(np.zeros((3, 2, 3)), np.array([[1], [2]]), [3, 3], [1, 0])
    with pytest.raises(UnsupportedProblem, match=r"empty target \(samples \[1\]\)"):
        backend.run(problem)


@pytest.mark.parametrize("name", ("optax", "tf-dense", "warpctc"))
def test_empty_target_matches_closed_form(rng, name):
    """An empty target beside a normal one: loss is -sum log p(blank) (closed form), gradient p - onehot(blank)."""
    backend = backend_or_skip(name)
    dtype = DTYPES[name][-1]
    logits = rng.normal(size=(5, 2, 4)).astype(dtype)
    problem = CTCProblem(logits, np.array([[2, 3], [1, 1]]), [5, 4], [0, 2])
    result = backend.run(problem)
    lp = oracles.log_softmax(logits[:, 0].astype(np.float64))  # (T, C)
    loss_tol, grad_tol = tolerance(name, dtype)
    assert result.loss[0] == pytest.approx(oracles.empty_target_loss(logits[:, 0].astype(np.float64)),
                                           rel=loss_tol)
    np.testing.assert_allclose(result.grad_logits[:, 0], np.exp(lp) - np.eye(4)[0], atol=grad_tol)


def test_warpctc_refuses_zero_length_inputs():
    """warp-ctc corrupts its heap on an input of length 0; the adapter refuses it."""
    backend = backend_or_skip("warpctc")
    problem = CTCProblem(np.zeros((3, 2, 3)), np.array([[1], [2]]), [3, 0], [1, 0])
    with pytest.raises(UnsupportedProblem, match=r"input of length 0 \(samples \[1\]\)"):
        backend.run(problem)


def test_missing_extra_gives_the_install_hint(monkeypatch):
    """Without the extras, each backend is unavailable with `pip install 'ctcbench[extra]'`."""
    real = importlib.util.find_spec
    hidden = {"jax", "optax", "tensorflow", "paddle"}
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda mod, *a: None if mod in hidden else real(mod, *a))
    for name in THIRD_PARTY:
        with pytest.raises(BackendUnavailable) as info:
            get_backend(name)
        assert info.value.hint == f"pip install 'ctcbench[{EXTRAS[name]}]'"
    result = CliRunner().invoke(cli, ["backends", "--format", "json"])
    assert result.exit_code == 0
    rows = {r["name"]: r for r in json.loads(result.stdout)}
    for name in THIRD_PARTY:
        assert not rows[name]["available"] and "not installed" in rows[name]["reason"]
        assert rows[name]["hint"] == f"pip install 'ctcbench[{EXTRAS[name]}]'"
    table = CliRunner().invoke(cli, ["backends"]).output
    assert "tf-dense     unavailable  builtin  tensorflow is not installed -> " \
           "pip install 'ctcbench[tf]'" in table


def test_backends_command_lists_them_without_importing_frameworks():
    """`ctcbench backends` lists all four and imports none of JAX, TensorFlow, Paddle."""
    import subprocess
    import sys
    code = ("import sys; from click.testing import CliRunner; from ctcbench.cli import cli\n"
            "r = CliRunner().invoke(cli, ['backends']); print(r.output)\n"
            "print(sorted(m for m in ('jax', 'tensorflow', 'paddle', 'optax') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         timeout=120, check=True).stdout
    for name in THIRD_PARTY:
        assert any(line.split()[:1] == [name] for line in out.splitlines()), out
    assert out.strip().splitlines()[-1] == "[]"


@pytest.mark.skipif(importlib.util.find_spec("keras") is not None, reason="needs keras absent")
def test_an_unavailable_backend_names_only_the_missing_module():
    """torch is here (the default install) and keras is not: keras-torch names keras alone."""
    with pytest.raises(BackendUnavailable) as info:
        get_backend("keras-torch")
    assert str(info.value).startswith("keras is not installed")
