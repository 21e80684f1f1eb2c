"""Reductions follow torch's conventions, checked against torch itself."""
import numpy as np
import pytest
import torch

from ctcbench import reduce_loss
from ctcbench.core.reduction import backend_reduction, reduction_weights


@pytest.mark.parametrize("reduction", ["none", "sum", "mean"])
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_matches_torch_reductions(reduction, zero_infinity):
    """mean divides each loss by its target length first, then averages; inf handled like torch."""
    rng = np.random.default_rng(0)
    logits = torch.tensor(rng.normal(size=(5, 3, 4)))
    targets = torch.tensor([[1, 2, 3], [1, 1, 1], [2, 0, 0]])
    il, tl = torch.tensor([5, 4, 5]), torch.tensor([3, 3, 1])  # sample 1 is infeasible
    kwargs = dict(blank=0, zero_infinity=zero_infinity)
    per_seq = torch.nn.functional.ctc_loss(logits.log_softmax(-1), targets, il, tl,
                                           reduction="none", blank=0).numpy()
    expected = torch.nn.functional.ctc_loss(logits.log_softmax(-1), targets, il, tl,
                                            reduction=reduction, **kwargs).numpy()
    got = reduce_loss(per_seq, tl.numpy(), reduction, zero_infinity=zero_infinity)
    np.testing.assert_allclose(got, expected, rtol=1e-12)


def test_per_line_is_the_batch_mean_of_whole_losses():
    """per-line, by hand: losses 2, 6 and an infeasible inf with target lengths 1, 3, 2 give
    (2 + 6 + 0) / 3 with zero_infinity (no division by length: "mean" would give
    (2/1 + 6/3 + 0/2) / 3 = 4/3), and each loss weighs 1/3 in it."""
    loss, lengths = np.array([2.0, 6.0, np.inf]), np.array([1, 3, 2])
    assert reduce_loss(loss, lengths, "per-line", zero_infinity=True) == pytest.approx(8 / 3)
    assert reduce_loss(loss, lengths, "mean", zero_infinity=True) == pytest.approx(4 / 3)
    np.testing.assert_allclose(reduction_weights(lengths, "per-line"), [1 / 3] * 3)


def test_backend_reduction_asks_for_none_and_averages_per_line():
    """A training loss reduced per line asks the backend for per-sequence losses and takes
    their mean, in torch with its gradient (1/N each); torch's own names pass through."""
    name, finish = backend_reduction("per-line")
    losses = torch.tensor([2.0, 6.0, 0.0], requires_grad=True)
    out = finish(losses)
    out.backward()
    assert name == "none" and float(out.detach()) == pytest.approx(8 / 3)
    np.testing.assert_allclose(losses.grad.numpy(), [1 / 3] * 3)
    for name in ("mean", "sum"):
        inner, finish = backend_reduction(name)
        assert inner == name and finish(losses) is losses
    with pytest.raises(ValueError, match="reduction: expected one of mean, sum, per-line, "
                                         "got 'none'"):
        backend_reduction("none")


def test_unknown_reduction_names_the_choices():
    """A wrong reduction name is a ValueError listing the choices."""
    with pytest.raises(ValueError, match="reduction: expected one of none, sum, mean, per-line, "
                                         "got 'avg'"):
        reduce_loss(np.zeros(2), np.ones(2), "avg")


@pytest.mark.parametrize("loss, lengths, message", [
    ([1.0, 2.0], [1], r"target_lengths: expected shape \(2,\) non-negative integers"),
    ([1.0, 2.0], [1, -1], r"target_lengths: expected shape \(2,\) non-negative integers"),
    ([1.0, 2.0], [1, 1.5], r"target_lengths: expected shape \(2,\) non-negative integers"),
    ([[1.0, 2.0]], [1, 1], r"loss: expected shape \(N,\) per-sequence losses"),
])
def test_inputs_of_the_wrong_shape_are_refused(loss, lengths, message):
    """No silent broadcasting: [1, 2] with one target length is an error, not 3.0."""
    with pytest.raises(ValueError, match=message):
        reduce_loss(loss, lengths, "mean")
