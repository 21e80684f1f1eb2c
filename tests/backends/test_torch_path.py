"""The torch backends say, per result, which aten op computed the loss, read off torch's
profiler (``"torch path: aten::_ctc_loss"`` for the native kernel)."""
import numpy as np
import pytest

import ctcbench
from ctcbench.core.oracles import brute_force

torch = pytest.importorskip("torch")


def _problem(seed=0, T=5, C=4):
    rng = np.random.default_rng(seed)
    logits = rng.normal(size=(T, 2, C))
    return ctcbench.CTCProblem(logits, np.array([[1, 2], [3, 3]]), np.array([T, T - 1]),
                               np.array([2, 2]))


def test_torch_cpu_note_names_the_native_op():
    problem = _problem()
    result = ctcbench.get_backend("torch").run(problem)
    assert "torch path: aten::_ctc_loss" in result.notes
    # the note changes nothing in the answer: brute force agrees
    for n in range(2):
        T_n = int(problem.input_lengths[n])
        loss, grad = brute_force(problem.logits[:T_n, n], problem.targets[n], blank=0)
        assert result.loss[n] == pytest.approx(loss, rel=1e-9)
        np.testing.assert_allclose(result.grad_logits[:T_n, n], grad, atol=1e-9)


def test_note_on_every_call_and_for_each_problem():
    backend = ctcbench.get_backend("torch")
    first, second = _problem(0), _problem(1, T=6)
    for problem in (first, first, second, first):
        assert "torch path: aten::_ctc_loss" in backend.run(problem).notes


def test_note_with_infinite_losses_and_float32():
    logits = np.random.default_rng(2).normal(size=(2, 1, 3)).astype(np.float32)
    problem = ctcbench.CTCProblem(logits, np.array([[1, 1]]), np.array([2]), np.array([2]))
    result = ctcbench.get_backend("torch").run(problem)  # needs 3 frames: infeasible
    assert result.loss[0] == np.inf
    assert "torch path: aten::_ctc_loss" in result.notes


def test_profiler_runs_once_per_node_type_not_per_call(monkeypatch):
    """bench times run() itself for torch: the profiler must stay out of repeated calls."""
    backend = ctcbench.get_backend("torch")
    made = []
    real = torch.autograd.profiler.profile

    def counting(*args, **kwargs):
        made.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(torch.autograd.profiler, "profile", counting)
    for seed in range(5):
        assert "torch path: aten::_ctc_loss" in backend.run(_problem(seed, T=5 + seed)).notes
    assert len(made) == 1
