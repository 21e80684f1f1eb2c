"""Known answers: the published numbers as transcribed agree with brute force; closed forms agree too."""
from __future__ import annotations

import numpy as np
import pytest

from ctcbench.core.reference import forward_backward
from ctcbench.caselib.builders import build_raw, to_problem
from ctcbench.caselib.library import load_cases
from ctcbench.caselib.expected import known_answer
from ctcbench.core.ctcmath import collapse, minimal_path
from ctcbench.core.oracles import brute_force


@pytest.fixture(scope="module")
def by_name():
    return {c.name: c for c in load_cases()}


def _brute(problem):
    losses, grads = [], []
    for n in range(problem.shape[1]):
        T_n, L_n = problem.input_lengths[n], problem.target_lengths[n]
        loss, grad = brute_force(problem.logits[:T_n, n].astype(np.float64),
                                 problem.targets[n, :L_n], blank=problem.blank)
        losses.append(loss)
        grads.append(grad)
    return np.array(losses), grads


@pytest.mark.parametrize("name", ["tf_basic", "warpctc_small", "toy_alpha_beta"])
def test_published_values_agree_with_brute_force(by_name, name):
    """The transcribed published losses and gradients match enumeration of every path."""
    case = by_name[name]
    problem = to_problem(build_raw(case.build, case=name), "float64")
    answer = known_answer(problem, case.expect, case=name)
    loss, grads = _brute(problem)
    tol = case.tolerance("float64")
    np.testing.assert_allclose(answer.loss, loss, atol=tol.loss_atol)
    if answer.grad is not None:
        for n, g in enumerate(grads):
            np.testing.assert_allclose(answer.grad[: len(g), n], g, atol=tol.grad_atol)


def test_toy_alpha_beta_tables(by_name):
    """The hand-written alpha/beta tables match prefix/suffix enumeration and the reference's."""
    case = by_name["toy_alpha_beta"]
    probs = np.array(case.build["sample"][0]["probs"])  # (T, C)
    T, C = probs.shape
    ext = [0, 1, 0, 2, 0]  # extended labels of target [1, 2]
    alpha = np.zeros((T, 5))
    import itertools
    for t in range(T):  # alpha[t, s]: prefixes of length t+1 that end in state s
        for prefix in itertools.product(range(C), repeat=t + 1):
            p = np.prod(probs[np.arange(t + 1), prefix])
            c = collapse(prefix)
            for s in range(5):
                want = tuple(k for k in ext[: s + 1] if k)
                if c == want and prefix[-1] == ext[s]:
                    alpha[t, s] += p
    np.testing.assert_allclose(alpha, case.expect["alpha"], atol=1e-12)
    beta = np.zeros((T, 5))
    for t in range(T):  # beta[t, s]: suffixes over frames t+1.. that finish the target from s
        for suffix in itertools.product(range(C), repeat=T - 1 - t):
            p = np.prod(probs[np.arange(t + 1, T), suffix]) if suffix else 1.0
            for s in range(5):
                done = s // 2  # labels of [1, 2] emitted before state s
                rest = (1, 2)[done:] if ext[s] == 0 else (1, 2)[(s - 1) // 2:]
                if collapse((ext[s],) + suffix) == rest:
                    beta[t, s] += p
    np.testing.assert_allclose(beta, case.expect["beta"], atol=1e-12)
    fb = forward_backward(np.log(probs)[:, None], np.array([[1, 2]]), np.array([T]), np.array([2]))
    np.testing.assert_allclose(np.exp(fb.log_alpha[:, 0]), case.expect["alpha"], atol=1e-12)
    np.testing.assert_allclose(np.exp(fb.log_beta[:, 0]), case.expect["beta"], atol=1e-12)
    Z = (np.array(case.expect["alpha"]) * np.array(case.expect["beta"])).sum(axis=1)
    np.testing.assert_allclose(Z, 0.498, atol=1e-12)


def test_single_path_and_uniform_oracles_match_brute_force(rng):
    """Closed forms (one alignment, uniform predictions) equal enumeration on small problems."""
    from ctcbench import CTCProblem
    x = rng.normal(size=(4, 1, 3))
    p = CTCProblem(x, [[1, 1, 2]], [4], [3])
    want, grad = brute_force(x[:, 0], [1, 1, 2])
    got = known_answer(p, {"oracle": "single_path"})
    assert minimal_path([1, 1, 2], blank=0) == [1, 0, 1, 2]
    np.testing.assert_allclose(got.loss, [want], rtol=1e-12)
    np.testing.assert_allclose(got.grad[:, 0], grad, atol=1e-12)
    u = CTCProblem(np.zeros((6, 1, 3)), [[2, 2]], [6], [2])
    np.testing.assert_allclose(known_answer(u, {"oracle": "uniform"}).loss,
                               [brute_force(np.zeros((6, 3)), [2, 2])[0]], rtol=1e-12)


def test_oracle_preconditions_are_checked(rng):
    """An oracle used where it does not apply is a clear error, not a wrong answer."""
    from ctcbench import CTCProblem
    p = CTCProblem(rng.normal(size=(6, 1, 3)), [[1, 2]], [6], [2])
    with pytest.raises(ValueError, match=r"sample 0: expected input length .* \(oracle single_path\)"):
        known_answer(p, {"oracle": "single_path"}, case="c")
    with pytest.raises(ValueError, match=r"expected logits constant .* \(oracle uniform\)"):
        known_answer(p, {"oracle": "uniform"}, case="c")
    with pytest.raises(ValueError, match=r"expected an empty target \(oracle empty_target\)"):
        known_answer(p, {"oracle": "empty_target"}, case="c")
    with pytest.raises(ValueError, match="expected 1 published values"):
        known_answer(p, {"oracle": "published", "loss": [1.0, 2.0]}, case="c")
