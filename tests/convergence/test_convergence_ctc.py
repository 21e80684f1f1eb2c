"""The training loss through the registry: value and gradient against brute force."""
import numpy as np
import pytest
import torch

from ctcbench.convergence.ctc import ctc_loss_fn, model_loss
from ctcbench.core.oracles import brute_force


def _batch(rng, T=4, N=3, C=3):
    logits = torch.tensor(rng.normal(size=(T, N, C)) * 1.5, dtype=torch.float64, requires_grad=True)
    targets = torch.tensor([[1, 2], [2, 2], [1, 0]])  # (N, L)
    target_lengths = torch.tensor([2, 2, 1])
    input_lengths = torch.full((N,), T)
    return logits, targets, input_lengths, target_lengths


def _oracle(logits, targets, target_lengths, reduction):
    """Brute-force per-sample losses/grads, reduced by hand (torch's mean divides by length,
    per-line is the plain mean over the batch)."""
    x = logits.detach().numpy()
    N = x.shape[1]
    loss, grad = 0.0, np.zeros_like(x)
    for n in range(N):
        tl = int(target_lengths[n])
        l, g = brute_force(x[:, n], targets[n, :tl].tolist())
        w = {"mean": 1.0 / (tl * N), "sum": 1.0, "per-line": 1.0 / N}[reduction]
        loss += w * l
        grad[:, n] = w * g
    return loss, grad


@pytest.mark.parametrize("backend", ["torch", "numpy"])
@pytest.mark.parametrize("reduction", ["mean", "sum", "per-line"])
def test_loss_and_gradient_match_brute_force(rng, backend, reduction):
    """Both loss paths give the enumerated loss and its gradient w.r.t. the logits."""
    logits, targets, il, tl = _batch(rng)
    loss = ctc_loss_fn(backend, reduction=reduction)(logits, targets, il, tl)
    loss.backward()
    want_loss, want_grad = _oracle(logits, targets, tl, reduction)
    assert float(loss.detach()) == pytest.approx(want_loss, rel=1e-9)
    np.testing.assert_allclose(logits.grad.numpy(), want_grad, atol=1e-9)


def test_numpy_backend_scales_upstream_gradient(rng):
    """The autograd wrapper multiplies its gradient by the upstream gradient."""
    logits, targets, il, tl = _batch(rng)
    (3.0 * ctc_loss_fn("numpy")(logits, targets, il, tl)).backward()
    _, want = _oracle(logits, targets, tl, "mean")
    np.testing.assert_allclose(logits.grad.numpy(), 3.0 * want, atol=1e-9)


def test_bad_reduction_and_backend():
    """Unknown reduction or backend names are clear errors."""
    with pytest.raises(ValueError, match="reduction: expected one of mean, sum, per-line, got 'none'"):
        ctc_loss_fn("torch", reduction="none")
    with pytest.raises(KeyError, match="backend: expected one of .*, got 'nope'"):
        ctc_loss_fn("nope")


def test_per_position_loss_is_cross_entropy_per_position():
    """The non-CTC baseline's loss, by hand: uniform outputs over C=4 classes give log 4 at
    every position, whatever the labels (class 0 = no character)."""
    model = torch.nn.Module()
    model.ctc = False
    model.forward = lambda x: torch.zeros(2, 3, 4)  # (N, max_len, C)
    loss, out = model_loss(model, None, torch.zeros(2, 1, 4, 4), torch.tensor([[1, 2, 0],
                                                                               [3, 0, 0]]), None)
    assert float(loss) == pytest.approx(np.log(4)) and tuple(out.shape) == (2, 3, 4)
