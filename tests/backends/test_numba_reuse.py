"""The numba backend hands a gradient array out again once its caller let go of it (reuse.py):
never one still held, and every entry rewritten (brute force on the reused array)."""
import gc

import numpy as np
import pytest

pytest.importorskip("numba", reason="needs numba, a dependency of ctcbench: pip install numba")

from ctcbench.backends.numba.backend import NumbaBackend  # noqa: E402
from conftest import check_against_brute_force, random_problem  # noqa: E402


def problems(count, seed=0):
    """``count`` random problems of one shape, different lengths and NaN padding each, so a
    stale entry of one in another's gradient would show."""
    rng = np.random.default_rng(seed)
    return [random_problem(rng, T=7, N=3, C=4, L=2) for _ in range(count)]


def test_a_let_go_gradient_is_reused_and_rewritten_everywhere():
    backend = NumbaBackend()
    first, second = problems(2)
    grad = backend.run(first).grad_logits
    address = grad.ctypes.data
    grad[...] = 1e300  # what a stale entry would leave
    del grad
    gc.collect()
    result = backend.run(second)
    assert result.grad_logits.ctypes.data == address  # the same memory, handed out again
    check_against_brute_force(second, result)


def test_a_held_gradient_is_never_handed_out_again():
    import torch

    backend = NumbaBackend()
    one, two, three = problems(3, seed=1)
    kept = backend.run(one)  # held as a result
    tensor = torch.from_numpy(backend.run(two).grad_logits)  # held by a tensor alone
    view = backend.run(three).grad_logits[1:]  # held through a view alone
    before = kept.grad_logits.copy(), tensor.numpy().copy(), view.copy()
    for problem in problems(4, seed=2):
        later = backend.run(problem)
        check_against_brute_force(problem, later)
    np.testing.assert_array_equal(kept.grad_logits, before[0])
    np.testing.assert_array_equal(tensor.numpy(), before[1])
    np.testing.assert_array_equal(view, before[2])
    check_against_brute_force(one, kept)


def test_a_loop_that_keeps_the_last_result_alternates_two_arrays():
    backend = NumbaBackend()
    addresses = []
    result = None
    for problem in problems(6, seed=3):
        result = backend.run(problem)  # the last result is held while the next call runs
        addresses.append(result.grad_logits.ctypes.data)
        check_against_brute_force(problem, result)
    assert len(set(addresses)) == 2


def test_another_shape_lets_the_kept_arrays_go():
    backend = NumbaBackend()
    small, = problems(1, seed=4)
    backend.run(small)
    big = random_problem(np.random.default_rng(5), T=9, N=2, C=5, L=3)
    result = backend.run(big)
    check_against_brute_force(big, result)
    assert [a.shape for a in backend._gradients._arrays] == [(9, 2, 5)]


def test_a_new_backend_object_per_call_reuses_too():
    first, second = problems(2, seed=6)
    address = NumbaBackend().run(first).grad_logits.ctypes.data
    result = NumbaBackend().run(second)
    assert result.grad_logits.ctypes.data == address
    check_against_brute_force(second, result)
