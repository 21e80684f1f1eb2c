"""torch's native CTC loss through its adapter, against brute force and the NumPy reference."""
import math

import numpy as np
import pytest
import torch

from ctcbench import BackendUnavailable, CTCProblem, UnsupportedProblem, get_backend
from ctcbench.core import oracles
from conftest import random_problem
from test_numpy_backend import check_against_brute_force


@pytest.mark.parametrize("seed", range(8))
def test_matches_brute_force_on_random_problems(seed):
    """torch in float64 equals the enumeration over all paths, padding and infeasible included."""
    rng = np.random.default_rng(100 + seed)
    C = int(rng.integers(2, 5))
    problem = random_problem(rng, T=int(rng.integers(1, 6)), N=3, C=C, L=3,
                             blank=[0, C // 2, C - 1][seed % 3], feasible=seed % 2 == 0)
    check_against_brute_force(problem, get_backend("torch").run(problem))


@pytest.mark.parametrize("blank", ["first", "middle", "last"])
def test_float64_agrees_with_numpy_reference(blank):
    """Random mid-sized problems: torch float64 within 1e-9 relative of the reference."""
    rng = np.random.default_rng(len(blank))
    C = 12
    b = {"first": 0, "middle": C // 2, "last": C - 1}[blank]
    problem = random_problem(rng, T=150, N=6, C=C, L=40, blank=b)
    ref, got = get_backend("numpy").run(problem), get_backend("torch").run(problem)
    np.testing.assert_allclose(got.loss, ref.loss, rtol=1e-9)
    np.testing.assert_allclose(got.grad_logits, ref.grad_logits, atol=1e-9)


def test_float32_agrees_with_numpy_reference_to_float32_rounding():
    """float32 torch vs float64 reference: relative loss error ~1e-6, gradient ~1e-5."""
    rng = np.random.default_rng(11)
    problem = random_problem(rng, T=100, N=4, C=20, L=20, dtype=np.float32)
    ref, got = get_backend("numpy").run(problem), get_backend("torch").run(problem)
    assert got.compute_dtype == "float32"
    np.testing.assert_allclose(got.loss, ref.loss, rtol=2e-5)
    np.testing.assert_allclose(got.grad_logits, ref.grad_logits, atol=1e-4)


def test_long_uniform_input_matches_closed_form():
    """T = 3000 uniform frames: torch float64 equals T log C - log binom(T + L - r, 2L)."""
    T, C, target = 3000, 6, [1, 1, 2, 3, 3, 4, 5] * 15
    problem = CTCProblem(np.zeros((T, 1, C)), np.array([target]), [T], [len(target)])
    assert get_backend("torch").run(problem).loss[0] == pytest.approx(
        oracles.uniform_loss(T, C, target), rel=1e-9)


def test_infeasible_gives_inf_and_zero_gradient_and_says_how():
    """An infeasible sample is +inf with zero gradient; the note says zero_infinity was needed."""
    logits = np.random.default_rng(2).normal(size=(3, 2, 3))
    problem = CTCProblem(logits, np.array([[1, 1], [1, 2]]), [2, 3], [2, 2])
    result = get_backend("torch").run(problem)
    assert result.loss[0] == math.inf and not result.grad_logits[:, 0].any()
    assert np.isfinite(result.grad_logits).all()
    assert any("zero_infinity" in note for note in result.notes)


def test_torch_log_prob_gradient_convention():
    """torch's gradient w.r.t. log_probs is exp(log_probs) - gamma, not the true -gamma; through
    log_softmax both give the same gradient w.r.t. the logits (pytorch issues 52241, 82545)."""
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(6, 1, 4))
    target = [1, 2, 2]
    _, grad_logits = oracles.brute_force(logits[:, 0], target)  # = softmax - gamma
    p = np.exp(oracles.log_softmax(logits[:, 0]))
    gamma = p - grad_logits

    log_probs = torch.tensor(oracles.log_softmax(logits), requires_grad=True)
    torch.nn.functional.ctc_loss(log_probs, torch.tensor([target]), [6], [3], reduction="sum").backward()
    torch_grad = log_probs.grad[:, 0].numpy()
    np.testing.assert_allclose(torch_grad, p - gamma, atol=1e-10)  # torch's convention
    assert np.abs(torch_grad - (-gamma)).max() > 0.1  # ... which is not the true d loss / d log p

    def through_log_softmax(g):  # chain rule: g - softmax * sum_c g
        return g - p * g.sum(-1, keepdims=True)
    np.testing.assert_allclose(through_log_softmax(torch_grad), grad_logits, atol=1e-10)
    np.testing.assert_allclose(through_log_softmax(-gamma), grad_logits, atol=1e-10)

    x = torch.tensor(logits, requires_grad=True)  # the same, by autograd through log_softmax
    torch.nn.functional.ctc_loss(x.log_softmax(-1), torch.tensor([target]), [6], [3],
                                 reduction="sum").backward()
    np.testing.assert_allclose(x.grad[:, 0].numpy(), grad_logits, atol=1e-10)


def test_half_precision_on_cpu_is_unsupported():
    """torch's CPU kernel has no float16/bfloat16: a clear UnsupportedProblem, not a crash."""
    problem = CTCProblem(torch.zeros(4, 1, 3, dtype=torch.bfloat16), np.array([[1]]), [4], [1])
    with pytest.raises(UnsupportedProblem, match="bfloat16"):
        get_backend("torch").run(problem)


@pytest.mark.skipif(torch.cuda.is_available(),
                    reason="checks the no-GPU path: run with CUDA_VISIBLE_DEVICES=''")
@pytest.mark.parametrize("name", ["torch-cuda", "torch-cudnn"])
def test_cuda_backends_are_unavailable_without_gpu(name):
    """Without a GPU the CUDA backends say so instead of failing later."""
    with pytest.raises(BackendUnavailable, match="CUDA"):
        get_backend(name)


def test_cudnn_rejects_problems_that_cannot_take_its_path():
    """cuDNN needs blank 0, full-length inputs and targets < 256: other problems get a reason."""
    from ctcbench.backends.torch_native import TorchCudnnBackend
    backend = object.__new__(TorchCudnnBackend)  # the checks need no GPU
    problem = CTCProblem(np.zeros((300, 2, 5), dtype=np.float32), np.ones((2, 256), dtype=int),
                         [300, 200], [256, 3], blank=0)
    with pytest.raises(UnsupportedProblem) as err:
        backend._check(problem)
    assert "input length must equal T" in str(err.value) and "< 256" in str(err.value)


@pytest.mark.skipif(not torch.cuda.is_available(),
                    reason="needs a CUDA GPU and a CUDA build of torch")
@pytest.mark.parametrize("name", ["torch-cuda", "torch-cudnn"])
def test_cuda_backends_match_reference(name):
    """On a GPU: float32 CUDA and cuDNN kernels agree with the reference."""
    rng = np.random.default_rng(5)
    problem = random_problem(rng, T=60, N=4, C=10, L=12, dtype=np.float32, full_length=True,
                             garbage=False)
    ref, got = get_backend("numpy").run(problem), get_backend(name).run(problem)
    np.testing.assert_allclose(got.loss, ref.loss, rtol=1e-4)
    np.testing.assert_allclose(got.grad_logits, ref.grad_logits, atol=1e-4)


def test_no_frames_at_all():
    """T = 0 (torch's kernel refuses empty log_probs): only the empty target has a path, so
    the loss is 0 for it and inf otherwise, with a zero-size gradient."""
    problem = CTCProblem(np.zeros((0, 3, 4), np.float32), [[1, 2], [0, 0], [3, 0]], [0, 0, 0],
                         [2, 0, 1])
    for result in (get_backend("torch").run(problem),
                   get_backend("torch").run(problem, grad_weights=[1.0, -2.0, 0.5])):
        np.testing.assert_array_equal(result.loss, [math.inf, 0.0, math.inf])
        assert result.grad_logits.shape == (0, 3, 4)
