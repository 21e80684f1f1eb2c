"""Inputs a framework's API cannot express are refused by ``raw_ctc`` with UnsupportedProblem,
before any framework call: optax takes padding masks (no length < 0 or past its axis), TF's
sparse labels no target length outside [0, S], TF's and warp-ctc's int32 labels no label
past int32. Sent through the worker all the same."""
from __future__ import annotations

import numpy as np
import pytest

from ctcbench import BackendUnavailable, UnsupportedProblem, get_backend
from ctcbench.runtime.worker import shutdown_workers

pytestmark = pytest.mark.usefixtures("one_thread")  # workers on one thread each

T, N, C, S = 4, 2, 3, 2
LOGITS = np.zeros((T, N, C), np.float32)
TARGETS = np.array([[1, 2], [2, 1]], np.int64)
LENGTHS = np.array([T, T], np.int64)
TARGET_LENGTHS = np.array([2, 1], np.int64)


@pytest.fixture(scope="module", autouse=True)
def _stop_workers():
    yield
    shutdown_workers()


def backend_or_skip(name):
    try:
        return get_backend(name, isolated=True)
    except BackendUnavailable as exc:
        pytest.skip(f"needs backend {name}: {exc}")


@pytest.mark.parametrize("name, change, match", [
    ("optax", {"input_lengths": np.array([-1, T])}, "input length < 0 or > 4"),
    ("optax", {"input_lengths": np.array([T + 1, T])}, "input length < 0 or > 4"),
    ("optax", {"target_lengths": np.array([-2, 1])}, "target length < 0 or > 2"),
    ("optax", {"target_lengths": np.array([S + 1, 1])}, "target length < 0 or > 2"),
    ("tf", {"target_lengths": np.array([-1, 1])}, "sparse labels cannot express"),
    ("tf", {"target_lengths": np.array([S + 1, 1])}, "sparse labels cannot express"),
    ("tf", {"targets": np.array([[1, 2**40], [2, 1]])}, "label does not fit in int32"),
    ("tf-dense", {"targets": np.array([[1, 2], [-2**40, 1]])}, "label does not fit in int32"),
    ("tf-dense", {"target_lengths": np.array([2**33, 1])}, "target length does not fit"),
    ("warpctc", {"targets": np.array([[1, 2**40], [2, 1]])}, "int32 labels"),
])
def test_what_the_api_cannot_say_is_unsupported(name, change, match):
    backend = backend_or_skip(name)
    arrays = {"logits": LOGITS, "targets": TARGETS, "input_lengths": LENGTHS,
              "target_lengths": TARGET_LENGTHS, **change}
    with pytest.raises(UnsupportedProblem, match=match):
        backend.raw_ctc(arrays["logits"], arrays["targets"], arrays["input_lengths"],
                        arrays["target_lengths"], blank=0)
    # the worker lives on: the same backend answers a valid input
    out = backend.raw_ctc(LOGITS, TARGETS, LENGTHS, TARGET_LENGTHS, blank=0)
    assert out.outcome == "returned", out.message
