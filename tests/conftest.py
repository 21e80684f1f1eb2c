"""Shared fixtures: random CTC problems of any shape, with controllable blank and padding."""
from __future__ import annotations

import contextlib
import textwrap

import numpy as np
import pytest

import ctcbench
from ctcbench import CTCProblem


def random_problem(rng: np.random.Generator, *, T: int, N: int, C: int, L: int, blank: int = 0,
                   dtype=np.float64, scale: float = 2.0, garbage: bool = True,
                   full_length: bool = False, feasible: bool = True) -> CTCProblem:
    """A random problem: lengths vary per sample; padded frames hold NaN when ``garbage``.

    With ``feasible`` every target fits its input (L + repeats <= input length).
    """
    labels = np.array([c for c in range(C) if c != blank])
    logits = (rng.normal(size=(T, N, C)) * scale).astype(dtype)  # (T, N, C)
    targets = rng.choice(labels, size=(N, max(L, 1)))  # (N, L)
    target_lengths = rng.integers(0, L + 1, size=N)
    input_lengths = np.full(N, T) if full_length else rng.integers(0, T + 1, size=N)
    if feasible:
        for n in range(N):
            t = targets[n, : target_lengths[n]]
            need = len(t) + int((t[1:] == t[:-1]).sum())
            input_lengths[n] = max(input_lengths[n], min(need, T))
            while target_lengths[n] and len(t) + int((t[1:] == t[:-1]).sum()) > input_lengths[n]:
                target_lengths[n] -= 1
                t = targets[n, : target_lengths[n]]
    if garbage:
        for n in range(N):
            logits[input_lengths[n]:, n] = np.nan
    return CTCProblem(logits, targets, input_lengths, target_lengths, blank=blank)


# a project under test that tests/function/test_ci_recipes.py copies and runs, not our tests
collect_ignore = ["function/scratch"]


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


TOY_PLUGIN = '''
import numpy as np
from ctcbench import BackendUnavailable


class UniformGuess:
    """A toy plugin: returns T*log(C) per sample and a zero gradient."""

    def run(self, problem):
        T, N, C, _ = problem.shape

        class Result:
            loss = problem.input_lengths * np.log(C)
            grad_logits = np.zeros((T, N, C))
        return Result()


class NeedsGpu:
    def __init__(self):
        raise BackendUnavailable("no accelerator here", "pip install toy-gpu")
'''


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    """A real distribution on sys.path declaring two entry points in group ctcbench.backends:
    ``toy`` (runs, wrong on purpose) and ``toy-gpu`` (unavailable)."""
    (tmp_path / "toy_ctc.py").write_text(TOY_PLUGIN)
    dist = tmp_path / "toy_ctc-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-ctc\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[ctcbench.backends]\ntoy = toy_ctc:UniformGuess\ntoy-gpu = toy_ctc:NeedsGpu\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def registered_for_one_test(monkeypatch, register_backends, plugins: dict):
    """For an autouse fixture (``yield from``): register ``plugins`` (name -> "module:attr"),
    one thread each, for one test; stop their worker processes afterwards."""
    from ctcbench.runtime.worker import shutdown_workers
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    for name, spec in plugins.items():
        register_backends(name, spec)
    yield
    shutdown_workers()


@pytest.fixture
def register_backends():
    """``add(name, factory)`` registers a backend for one test through the public API;
    every name it added is unregistered afterwards."""
    added = []

    def add(name: str, factory) -> None:
        ctcbench.register_backend(name, factory)
        added.append(name)
    yield add
    for name in reversed(added):
        if name in ctcbench.runtime.registry.backend_names():
            ctcbench.unregister_backend(name)


def spike_paths(problem: CTCProblem) -> np.ndarray:
    """``(T, N)`` class per frame of a trained model's alignment: one-frame label spikes,
    evenly spaced, blank elsewhere (or the minimal path stretched when frames are scarce)."""
    T, N, _, _ = problem.shape
    blank = problem.blank
    paths = np.full((T, N), blank, dtype=np.int64)
    for n in range(N):
        y = problem.targets[n, : problem.target_lengths[n]].tolist()
        length = int(problem.input_lengths[n])
        if not y:
            continue
        if length >= 2 * len(y):
            for k, label in enumerate(y):
                paths[int((k + 0.5) * length / len(y)), n] = label
            continue
        minimal = []
        for k, label in enumerate(y):
            minimal += [blank, label] if k and label == y[k - 1] else [label]
        paths[:length, n] = [minimal[t * len(minimal) // length] for t in range(length)]
    return paths


def trained_log_probs(rng: np.random.Generator, problem: CTCProblem, *, peak: float = 8.0,
                      noise: float = 1.0, paths: np.ndarray | None = None) -> np.ndarray:
    """``(T, N, C)`` log_softmax of noisy logits peaked on ``paths`` (default: spike paths),
    like a trained model's output; padded frames hold NaN."""
    T, N, C, _ = problem.shape
    paths = spike_paths(problem) if paths is None else paths
    logits = rng.normal(size=(T, N, C)) * noise  # (T, N, C)
    logits[np.arange(T)[:, None], np.arange(N)[None, :], paths] += peak
    logits -= logits.max(-1, keepdims=True)
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    lp[~problem.frame_mask] = np.nan
    return lp


@pytest.fixture
def tiny_grid(tmp_path):
    """A one-size bench grid file (JSON), fast enough for the CLI tests."""
    path = tmp_path / "grid.json"
    path.write_text('[{"T": 20, "N": 2, "C": 5, "L": 4}]')
    return path


# -- convergence: tiny configs and one short run that really learns ------------------------
def tiny_train_config(**overrides):
    """A training config small enough for a unit test (seconds, not minutes)."""
    from ctcbench.convergence.data import DataConfig
    from ctcbench.convergence.trainconfig import ModelConfig, TrainConfig
    data = DataConfig(train_size=64, test_size=16, min_len=1, max_len=3, width=64)
    model = ModelConfig(channels=4, hidden=8)
    base = dict(steps=4, batch_size=8, eval_every=2, model=model, data=data)
    base.update(overrides)
    return TrainConfig(**base)


@pytest.fixture(scope="session")
def learned_run(tmp_path_factory):
    """One short real training run (about a minute on 2 cores) that must learn; shared by the
    training and prediction tests. Returns (summary, run_dir, config)."""
    import torch

    from ctcbench.convergence.data import DataConfig
    from ctcbench.convergence.trainconfig import ModelConfig, TrainConfig
    from ctcbench.convergence.train import train_run
    torch.set_num_threads(1)
    cfg = TrainConfig(optimizer="adam", lr=3e-3, steps=LEARN_STEPS, batch_size=16, eval_every=50,
                      model=ModelConfig(name="crnn", batchnorm=True, channels=8, hidden=32),
                      data=DataConfig(kind="lines", charset="0123456789", min_len=2, max_len=4,
                                      width=64, train_size=1500, test_size=64))
    run_dir = tmp_path_factory.mktemp("learned")
    summary = train_run(cfg, run_dir)
    return summary, run_dir, cfg


LEARN_STEPS = 300


def check_against_brute_force(problem, result, tol=1e-9):
    """Every sample's loss and gradient equal the enumeration over all paths (a backend's
    ``result`` for ``problem``); padded frames and infeasible samples get zero gradient."""
    import math

    from ctcbench.core import oracles
    for n in range(problem.shape[1]):
        T_n, L_n = problem.input_lengths[n], problem.target_lengths[n]
        logits = problem.logits[:T_n, n].astype(np.float64)
        loss, grad = oracles.brute_force(logits, problem.targets[n, :L_n], blank=problem.blank)
        if math.isinf(loss):
            assert result.loss[n] == math.inf
            assert not result.grad_logits[:, n].any()
            continue
        assert result.loss[n] == pytest.approx(loss, rel=tol, abs=tol)
        np.testing.assert_allclose(result.grad_logits[:T_n, n], grad, atol=tol)
        assert not result.grad_logits[T_n:, n].any(), "padded frames must get zero gradient"


def brute_force_batch(problem):
    """Per-sample brute-force loss ``(N,)`` and gradient ``(T, N, C)`` of a whole problem
    (gradient 0 for infeasible samples and padded frames)."""
    import math

    from ctcbench.core import oracles
    T, N, C, _ = problem.shape
    loss, grad = np.zeros(N), np.zeros((T, N, C))
    for n in range(N):
        T_n, L_n = problem.input_lengths[n], problem.target_lengths[n]
        loss[n], g = oracles.brute_force(problem.logits[:T_n, n], problem.targets[n, :L_n],
                                         blank=problem.blank)
        if math.isfinite(loss[n]):
            grad[:T_n, n] = g
    return loss, grad


# The source of tests/wrong_backends.py, for tests that install it as a plugin distribution.
WRONG_BACKENDS_SOURCE = (__import__("pathlib").Path(__file__).parent / "wrong_backends.py").read_text()


# one case in the case-file format, its name and oracle to fill in
MINIMAL_CASE = """
[[case]]
name = "{name}"
description = "one sample"
provenance = "test"
[case.build]
generator = "random"
C = 3
[[case.build.sample]]
target = [1]
T = 2
[case.expect]
oracle = "{oracle}"
"""


@pytest.fixture(scope="module")
def one_thread():
    """Backends (and the workers they start) in the module use one thread each."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CTCBENCH_THREADS", "1")
    yield
    mp.undo()


@contextlib.contextmanager
def running_backend(name: str):
    """The backend ``name`` on one thread, closed afterwards; the test skips, saying why, when
    it cannot run here."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CTCBENCH_THREADS", "1")
    try:
        loaded = ctcbench.get_backend(name)
    except ctcbench.BackendUnavailable as exc:
        mp.undo()
        pytest.skip(f"needs backend {name}: {exc}")
    try:
        yield loaded
    finally:
        loaded.close()
        mp.undo()


def plugin_distribution(folder, name: str, module: str, source: str, attr: str) -> None:
    """A tiny installed distribution in ``folder`` (put it on ``sys.path``): ``module.py``
    holding ``source``, and a dist-info whose entry point registers ``module:attr`` as the
    backend ``name``."""
    (folder / f"{module}.py").write_text(textwrap.dedent(source))
    info = folder / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[ctcbench.backends]\n{name} = {module}:{attr}\n")
