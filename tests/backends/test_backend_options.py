"""Backend options compare relies on: upstream gradient weights and the caller's target form."""
from __future__ import annotations

import numpy as np
import pytest

from ctcbench import CTCProblem, get_backend
from ctcbench.core.oracles import brute_force


@pytest.fixture
def problem(rng):
    logits = rng.normal(size=(5, 2, 3))  # (T, N, C)
    return logits, CTCProblem(logits, [[1, 1], [2, 0]], [5, 4], [2, 1])


@pytest.mark.parametrize("name", ["numpy", "torch"])
def test_grad_weights_scale_each_sample(problem, name):
    """run(grad_weights=w) returns w_n times the brute-force gradient of sample n; loss unchanged."""
    logits, p = problem
    w = np.array([-1.5, 3.0])
    res = get_backend(name).run(p, grad_weights=w)
    for n, (T_n, target) in enumerate([(5, [1, 1]), (4, [2])]):
        loss, grad = brute_force(logits[:T_n, n], target)
        np.testing.assert_allclose(res.loss[n], loss, rtol=1e-10)
        np.testing.assert_allclose(res.grad_logits[:T_n, n], w[n] * grad, atol=1e-10)
    assert not res.grad_logits[4:, 1].any()


def test_problem_remembers_target_form(problem):
    """CTCProblem keeps the caller's layout and index dtype; with_logits keeps them too."""
    logits, _ = problem
    p = CTCProblem(logits, np.array([1, 1, 2], np.int32), np.array([5, 4], np.int32),
                   np.array([2, 1], np.int32))
    assert (p.target_layout, p.index_dtype) == ("concatenated", "int32")
    assert p.targets.tolist() == [[1, 1], [2, 0]] and p.targets.dtype == np.int64
    q = p.with_logits(logits.astype(np.float32))
    assert (q.target_layout, q.index_dtype, q.dtype) == ("concatenated", "int32", "float32")


def test_torch_gets_the_callers_target_form(problem):
    """The torch adapter hands ctc_loss int32 concatenated targets when that is what it was given."""
    logits, _ = problem
    p = CTCProblem(logits, np.array([1, 1, 2], np.int32), [5, 4], np.array([2, 1], np.int32))
    targets, input_lengths, target_lengths = get_backend("torch").impl._inputs(p)
    assert tuple(targets.shape) == (3,) and str(targets.dtype) == "torch.int32"
    assert str(input_lengths.dtype) == "torch.int32"
