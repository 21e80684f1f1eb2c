"""The ``raw`` request: a backend's own call on unchecked arrays, inside its worker.

What travels is checked against what was sent; answers on valid input against brute-force
enumeration; crashes, hangs and exceptions against plugins that really crash, hang and raise
(tests/raw_backends.py).
"""
from __future__ import annotations

import time

import numpy as np
import pytest

from conftest import check_against_brute_force, random_problem, registered_for_one_test
from ctcbench import (
    BackendCrashed,
    BackendTimeout,
    BackendTraits,
    UnsupportedProblem,
    get_backend,
)
from ctcbench.runtime.protocol import RawOutcome

PLUGINS = {
    "raw-segv": "raw_backends:RawSegfaultOnBlankOne",
    "raw-hang": "raw_backends:RawHangOnBlankOne",
    "raw-raises": "raw_backends:RawRaises",
    "raw-echo": "raw_backends:RawEcho",
    "raw-none": "raw_backends:NoRawHook",
}


@pytest.fixture(autouse=True)
def plugins(monkeypatch, register_backends):
    yield from registered_for_one_test(monkeypatch, register_backends, PLUGINS)


def _arrays(problem):
    return (problem.logits, problem.targets, problem.input_lengths, problem.target_lengths)


def _check_against_brute_force(problem, out: RawOutcome) -> None:
    assert out.outcome == "returned" and out.error_type is None
    check_against_brute_force(problem, out)


@pytest.fixture
def fine(rng):
    return random_problem(rng, T=5, N=3, C=3, L=2, blank=0, garbage=False)


def test_traits_read_the_hook_off_the_backend():
    """has_raw_ctc is True for a callable raw_ctc, False without one or for a non-callable."""
    from raw_backends import NoRawHook, RawEcho

    class NotCallable(NoRawHook):
        raw_ctc = "not a method"
    assert BackendTraits.of(RawEcho()).has_raw_ctc
    assert not BackendTraits.of(NoRawHook()).has_raw_ctc
    assert not BackendTraits.of(NotCallable()).has_raw_ctc
    assert get_backend("numpy").traits.has_raw_ctc


def test_returned_outcome_is_the_exact_loss(fine):
    """numpy's raw_ctc through the worker: loss and gradient equal brute force."""
    out = get_backend("numpy", isolated=True).raw_ctc(*_arrays(fine), blank=fine.blank)
    assert isinstance(out, RawOutcome) and out.message is None
    _check_against_brute_force(fine, out)


def test_segfault_is_a_crash_and_the_next_call_works(fine):
    """A raw_ctc that kills its process with SIGSEGV raises BackendCrashed naming the signal;
    the next request gets a fresh worker and the right answer."""
    backend = get_backend("raw-segv", isolated=True)
    _check_against_brute_force(fine, backend.raw_ctc(*_arrays(fine), blank=0))
    first_pid = backend.worker_pid
    with pytest.raises(BackendCrashed) as info:
        backend.raw_ctc(*_arrays(fine), blank=1)
    assert info.value.signal == "SIGSEGV" and info.value.status == "crashed"
    assert backend.worker_pid is None
    _check_against_brute_force(fine, backend.raw_ctc(*_arrays(fine), blank=0))
    assert backend.worker_pid not in (None, first_pid)


def test_hang_times_out_within_the_timeout_asked_for(fine):
    """timeout_s of the call, not the 600 s trait, bounds a hanging raw_ctc; then it runs on."""
    backend = get_backend("raw-hang", isolated=True)
    assert backend.traits.timeout_s == 600.0
    backend.raw_ctc(*_arrays(fine), blank=0)  # the worker is up: only the call is timed
    t0 = time.monotonic()
    with pytest.raises(BackendTimeout) as info:
        backend.raw_ctc(*_arrays(fine), blank=1, timeout_s=1.5)
    assert time.monotonic() - t0 < 10
    assert info.value.timeout_s == 1.5 and info.value.status == "timeout"
    _check_against_brute_force(fine, backend.raw_ctc(*_arrays(fine), blank=0, timeout_s=60))


@pytest.mark.parametrize("timeout_s", [0, -1, float("inf"), True, "5"])
def test_a_bad_timeout_is_refused(fine, timeout_s):
    with pytest.raises(ValueError, match="timeout_s: expected a positive finite number"):
        get_backend("raw-echo", isolated=True).raw_ctc(*_arrays(fine), blank=0,
                                                       timeout_s=timeout_s)


@pytest.mark.parametrize("isolated", [True, False])
@pytest.mark.parametrize("blank, error_type, message", [
    (1, "ZeroDivisionError", "division by zero"),
    (2, "raw_backends.FrameworkError", "labels out of range in the framework"),
])
def test_an_exception_is_the_raised_outcome(fine, isolated, blank, error_type, message):
    """What the hook raises comes back as outcome "raised", its class (with its module unless
    a builtin) and message, in a worker and in-process alike; the worker lives on."""
    backend = get_backend("raw-raises", isolated=isolated)
    out = backend.raw_ctc(*_arrays(fine), blank=blank)
    assert out == RawOutcome("raised", None, None, error_type, message)
    if isolated:
        pid = backend.worker_pid
        _check_against_brute_force(fine, backend.raw_ctc(*_arrays(fine), blank=0))
        assert backend.worker_pid == pid


def test_a_long_message_is_cut(fine):
    out = get_backend("raw-raises", isolated=True).raw_ctc(*_arrays(fine), blank=4)
    assert out.outcome == "raised" and out.error_type == "RuntimeError"
    assert out.message == "x" * 2000


@pytest.mark.parametrize("isolated", [True, False])
def test_unsupported_is_raised_as_itself(fine, isolated):
    """The hook's UnsupportedProblem (the API cannot express the input) is raised, not an
    outcome; so is a backend without the hook, naming it."""
    with pytest.raises(UnsupportedProblem, match="raw-raises cannot express a negative length"):
        get_backend("raw-raises", isolated=isolated).raw_ctc(*_arrays(fine), blank=3)
    with pytest.raises(UnsupportedProblem, match="^raw-none has no raw_ctc hook$"):
        get_backend("raw-none", isolated=isolated).raw_ctc(*_arrays(fine), blank=0)


@pytest.mark.parametrize("isolated", [True, False])
def test_a_hook_that_returns_no_pair_is_a_type_error(fine, isolated):
    with pytest.raises(TypeError, match=r"raw_ctc: expected a \(loss, grad_logits\) pair"):
        get_backend("raw-raises", isolated=isolated).raw_ctc(*_arrays(fine), blank=5)


@pytest.mark.parametrize("T, N, S", [(0, 2, 3), (4, 0, 3), (0, 0, 0), (3, 2, 0)])
def test_empty_arrays_travel(T, N, S):
    """T = 0, an empty batch, no label columns: the arrays arrive with their shapes and
    dtypes, no CTCProblem is built on the way."""
    logits = np.full((T, N, 5), np.nan, np.float32)
    targets = np.full((N, S), 7, np.int64)
    lengths = np.full(N, -3, np.int64)
    out = get_backend("raw-echo", isolated=True).raw_ctc(logits, targets, lengths, lengths + 9,
                                                         blank=0)
    assert out.outcome == "returned", out.message
    np.testing.assert_array_equal(out.loss, np.concatenate([targets.ravel(), lengths, lengths + 9]))
    assert out.grad_logits.shape == (T, N, 5)


def test_malformed_values_travel_as_they_are():
    """NaN and inf logits, labels >= C, = blank, 2^31 - 1 and negative, lengths negative and
    past T and S reach the hook untouched; a grad of None stays None."""
    logits = np.array([[[np.nan, np.inf, -np.inf, 0.5]], [[1.0, 2.0, 3.0, 4.0]]], np.float32)
    targets = np.array([[4, 0, 2147483647, -2, 9]], np.int64)  # (1, 5), C = 4, blank 0
    input_lengths, target_lengths = np.array([-1], np.int64), np.array([99], np.int64)
    backend = get_backend("raw-echo", isolated=True)
    out = backend.raw_ctc(logits, targets, input_lengths, target_lengths, blank=0)
    np.testing.assert_array_equal(out.loss, [4, 0, 2147483647, -2, 9, -1, 99])
    np.testing.assert_array_equal(out.grad_logits, logits)  # NaN == NaN here
    out = backend.raw_ctc(logits, targets, input_lengths, target_lengths, blank=7)
    assert out.outcome == "returned" and out.grad_logits is None


def test_arrays_of_other_dtypes_are_sent_as_they_are():
    """Nothing is cast on the way: int32 lengths arrive as int32 (the echo refuses them)."""
    out = get_backend("raw-echo", isolated=True).raw_ctc(
        np.zeros((2, 1, 3), np.float32), np.ones((1, 1), np.int64), np.array([2], np.int32),
        np.array([1], np.int64), blank=0)
    assert out.outcome == "raised" and out.error_type == "TypeError"
    assert "int32" in out.message


def test_numpy_raw_refuses_malformed_input_with_a_value_error():
    """The reference's own entry point is a CTCProblem: a negative length is its ValueError,
    classified as "raised"."""
    logits = np.zeros((3, 1, 4), np.float32)
    out = get_backend("numpy", isolated=True).raw_ctc(
        logits, np.array([[1]]), np.array([-1]), np.array([1]), blank=0)
    assert out.outcome == "raised" and "input_lengths" in out.message
    assert issubclass(_resolve(out.error_type), ValueError)


def _resolve(qualified: str):
    import importlib
    module, _, name = qualified.rpartition(".")
    return getattr(importlib.import_module(module or "builtins"), name)
