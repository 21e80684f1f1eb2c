"""Convergence's beam decoding and error rates against brute-force enumeration and hand-counted
edits (the beam search itself: tests/core/test_beam.py)."""
import numpy as np
import pytest

from ctcbench.convergence.decode import beam_decode, error_rates
from ctcbench.core.ctcmath import log_softmax
from ctcbench.core.decoding import labelling_logprobs, prefix_count


@pytest.mark.parametrize("T,C", [(3, 3), (4, 3), (5, 3), (4, 4)])
def test_wide_beam_finds_most_probable_labelling(rng, T, C):
    """A beam wide enough to keep every prefix returns the argmax labelling of the enumeration."""
    for _ in range(5):
        lp = log_softmax(rng.normal(size=(T, C)) * 2)  # (T, C)
        totals = labelling_logprobs(lp)
        [found] = beam_decode(lp[:, None, :], [T], beam=prefix_count(T, C))
        assert found == max(totals, key=totals.get)


def test_beam_decode_batch_respects_each_sample_length(rng):
    """Each sample is decoded from its own frames only: the frames past its length (NaN here)
    are never read, and each answer is its frames' most probable labelling."""
    lp = log_softmax(rng.normal(size=(5, 2, 3)) * 2)  # (T, N, C)
    lp[2:, 1] = np.nan
    out = beam_decode(lp, [5, 2], beam=prefix_count(5, 3))
    for n, T in enumerate([5, 2]):
        totals = labelling_logprobs(lp[:T, n])
        assert out[n] == max(totals, key=totals.get)


def test_a_nan_model_decodes_as_nothing():
    """Outputs of a diverged model (NaN everywhere) read as the empty line, as greedy reads
    them (the argmax of NaN frames is class 0, the blank)."""
    assert beam_decode(np.full((4, 2, 3), np.nan), [4, 4], beam=4) == [(), ()]


@pytest.mark.parametrize("beam", [0, 257])
def test_beam_outside_its_range_is_refused(beam):
    """A beam of width 0 or above MAX_BEAM is a clear error naming the argument."""
    with pytest.raises(ValueError, match=rf"beam: expected an integer in \[1, 256\], got {beam}"):
        beam_decode(np.zeros((2, 1, 3)), [2], beam=beam)


def test_error_rates_hand_counted():
    """CER = edits / reference characters; sequence accuracy = exact matches / lines."""
    cer, acc = error_rates([(1, 2), (3,), ()], [(1, 2), (3, 4), (5, 6)])
    assert cer == pytest.approx(3 / 6)
    assert acc == pytest.approx(1 / 3)
