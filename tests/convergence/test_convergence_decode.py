"""Beam search and error rates against brute-force enumeration and hand-counted edits."""
import itertools

import numpy as np
import pytest

from ctcbench.convergence.decode import beam_decode, error_rates, prefix_beam_search
from ctcbench.core.ctcmath import collapse, log_softmax


def _labelling_probs(lp, blank=0):
    """Oracle: sum the probability of every path, grouped by the labelling it collapses to."""
    T, C = lp.shape
    totals = {}
    for path in itertools.product(range(C), repeat=T):
        label = collapse(path, blank=blank)
        totals[label] = np.logaddexp(totals.get(label, -np.inf), lp[np.arange(T), path].sum())
    return totals


@pytest.mark.parametrize("T,C", [(3, 3), (4, 3), (5, 3), (4, 4)])
def test_wide_beam_finds_most_probable_labelling(rng, T, C):
    """A beam wide enough to keep every prefix returns the argmax labelling of the enumeration."""
    for _ in range(5):
        lp = log_softmax(rng.normal(size=(T, C)) * 2)  # (T, C)
        totals = _labelling_probs(lp)
        best = max(totals, key=totals.get)
        found, logp = prefix_beam_search(lp, beam=C ** T)
        assert found == best
        assert logp == pytest.approx(totals[best], abs=1e-9)


def test_beam_decode_batch_matches_per_sample(rng):
    """beam_decode over a batch respects each sample's length."""
    lp = log_softmax(rng.normal(size=(5, 2, 3)))  # (T, N, C)
    out = beam_decode(lp, [5, 2], beam=4)
    assert out[1] == prefix_beam_search(lp[:2, 1], beam=4)[0]


def test_beam_rejects_zero_width():
    """A beam of width 0 is a clear error naming the argument."""
    with pytest.raises(ValueError, match=r"beam: expected an integer in \[1, 256\]"):
        prefix_beam_search(np.zeros((2, 3)), beam=0)


def test_error_rates_hand_counted():
    """CER = edits / reference characters; sequence accuracy = exact matches / lines."""
    cer, acc = error_rates([(1, 2), (3,), ()], [(1, 2), (3, 4), (5, 6)])
    assert cer == pytest.approx(3 / 6)
    assert acc == pytest.approx(1 / 3)
