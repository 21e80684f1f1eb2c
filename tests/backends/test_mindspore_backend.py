"""mindspore (mindspore.ops.ctc_loss) against brute force, and what it is refused."""
from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from ctcbench import BackendUnavailable, CTCProblem, UnsupportedProblem, get_backend
from ctcbench.core import oracles

from conftest import running_backend


@pytest.fixture(scope="module")
def backend():
    with running_backend("mindspore") as loaded:
        yield loaded


@pytest.mark.parametrize("dtype, rel, atol", [("float32", 2e-5, 5e-5), ("float64", 1e-12, 1e-12)])
def test_matches_brute_force(rng, backend, dtype, rel, atol):
    """Blank 0 and last, an empty target, repeats and ragged lengths, upstream gradients: loss
    and gradient equal the enumeration of every path, in float32 and float64."""
    for blank in (0, 3):
        labels = [c for c in range(4) if c != blank]
        logits = rng.normal(size=(6, 4, 4)).astype(dtype)
        targets = np.array([[labels[0], labels[0], labels[1]], [labels[1], 0, 0] if blank else
                            [labels[1], 1, 1], [labels[0], labels[1], 0], [0, 0, 0]])
        problem = CTCProblem(logits, targets, [6, 5, 6, 3], [3, 1, 2, 0], blank=blank)
        weights = np.array([1.0, 0.5, -2.0, 3.0])
        got = backend.run(problem, grad_weights=weights)
        for n in range(4):
            T_n, L_n = problem.input_lengths[n], problem.target_lengths[n]
            loss, grad = oracles.brute_force(problem.logits[:T_n, n].astype(np.float64),
                                             problem.targets[n, :L_n], blank=blank)
            assert got.loss[n] == pytest.approx(loss, rel=rel), (blank, n)
            np.testing.assert_allclose(got.grad_logits[:T_n, n], weights[n] * grad, atol=atol)
            assert not got.grad_logits[T_n:, n].any()


@pytest.mark.parametrize("problem, reason", [
    (CTCProblem(np.zeros((2, 1, 4), np.float32), [[1, 1, 2]], [2], [3]), "infeasible target"),
    (CTCProblem(np.where(np.eye(4)[None, :1].repeat(3, 0) > 0, -np.inf, 0).astype(np.float32),
                [[1]], [3], [1]), "logit of -inf"),
    (CTCProblem(np.zeros((3, 2, 3), np.float32), [[1], [0]], [3, 0], [1, 0]),
     r"input length of 0 \(samples \[1\]\)"),
])
def test_refuses_what_it_gets_wrong(backend, problem, reason):
    """NaN gradients (an infeasible target, a logit of -inf) and a failing kernel or a wrong
    loss (an input of length 0) are refused with the reason."""
    with pytest.raises(UnsupportedProblem, match=reason):
        backend.run(problem)


def test_missing_package_gives_the_install_hint(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda mod, *a: None if mod == "mindspore" else real(mod, *a))
    with pytest.raises(BackendUnavailable) as info:
        get_backend("mindspore")
    assert info.value.hint == "pip install 'ctcbench[mindspore]'"
