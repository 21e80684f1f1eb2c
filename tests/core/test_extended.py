"""The extended label sequence and the moves between classes and states, against hand-worked
values and plain per-element loops."""
import numpy as np
import pytest

from ctcbench.core.extended import end_states, extended_labels, gather_states, scatter_states


def test_extended_labels_hand_worked():
    """(1 1 2) -> (- 1 - 1 - 2 -); no skip into the second 1, a skip into 2; padding invalid."""
    targets = np.array([[1, 1, 2], [3, 0, 0]])  # (N, L), sample 1 has one label
    ext, valid, skip = extended_labels(targets, np.array([3, 1]), blank=0)
    assert ext.tolist() == [[0, 1, 0, 1, 0, 2, 0], [0, 3, 0, 0, 0, 0, 0]]
    assert valid.tolist() == [[True] * 7, [True] * 3 + [False] * 4]
    assert np.flatnonzero(skip[0]).tolist() == [5]
    assert not skip[1].any()


def test_end_states_are_the_last_two_valid_states():
    """S_n = 2 L_n + 1: the ends are S_n - 1 and S_n - 2; an empty target has one end state."""
    ends = end_states(np.array([2, 0]), 5)
    assert [np.flatnonzero(e).tolist() for e in ends] == [[3, 4], [0]]


def test_gather_states_is_the_fancy_index(rng):
    """x[t, n, ext[n, s]] for every t, n, s."""
    x = rng.normal(size=(4, 3, 5))  # (T, N, C)
    ext = rng.integers(0, 5, size=(3, 7))  # (N, S)
    want = np.array([[[x[t, n, ext[n, s]] for s in range(7)] for n in range(3)] for t in range(4)])
    assert np.array_equal(gather_states(x, ext), want)


@pytest.mark.parametrize("subtract", [False, True])
def test_scatter_states_sums_each_state_onto_its_class(rng, subtract):
    """Every state's value lands on its class, repeated labels adding up (a per-state loop)."""
    T, N, C = 3, 2, 4
    targets = np.array([[1, 1, 3], [2, 2, 2]])  # (N, L)
    ext, _, _ = extended_labels(targets, np.array([3, 3]), blank=0)
    post = rng.random(size=(T, N, ext.shape[1]))  # (T, N, S)
    start = rng.random(size=(T, N, C))
    want = start.copy()
    for t in range(T):
        for n in range(N):
            for s in range(ext.shape[1]):
                want[t, n, ext[n, s]] += -post[t, n, s] if subtract else post[t, n, s]
    got = start.copy()
    scatter_states(got, post, targets, blank=0, subtract=subtract)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-14)


def test_scatter_states_refuses_a_non_contiguous_output():
    """A strided view would be copied by reshape and lose the update: a clear error instead."""
    out = np.zeros((2, 2, 6))[:, :, ::2]
    with pytest.raises(ValueError, match="out: expected a C-contiguous array"):
        scatter_states(out, np.zeros((2, 2, 3)), np.array([[1], [2]]), blank=0)
