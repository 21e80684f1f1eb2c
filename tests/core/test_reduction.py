"""Reductions follow torch's conventions, checked against torch itself."""
import numpy as np
import pytest
import torch

from ctcbench import reduce_loss


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


def test_unknown_reduction_names_the_choices():
    """A wrong reduction name is a ValueError listing the choices."""
    with pytest.raises(ValueError, match="reduction: expected one of none, sum, mean, got 'avg'"):
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
