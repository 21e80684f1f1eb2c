"""Case builders: generators are deterministic and shaped right; transforms keep the answer's map."""
from __future__ import annotations

import numpy as np
import pytest

from ctcbench.caselib.builders import build_raw, to_problem, variants
from ctcbench.core.oracles import brute_force

BUILD = {"generator": "random", "seed": 3, "C": 4, "T": 7, "sample": [
    {"target": [1, 3, 3], "T": 6}, {"target": [2], "T": 3}]}


def _losses_and_grads(problem):
    """Brute force per sample on the variant's own problem, into (N,) and (T, N, C)."""
    T, N, C, _ = problem.shape
    loss, grad = np.zeros(N), np.zeros((T, N, C))
    for n in range(N):
        T_n, L_n = problem.input_lengths[n], problem.target_lengths[n]
        loss[n], grad[:T_n, n] = brute_force(problem.logits[:T_n, n].astype(np.float64),
                                             problem.targets[n, :L_n], blank=problem.blank)
    return loss, grad


def test_generators_are_seeded_and_shaped():
    """Same seed, same numbers; shapes (T, N, C) with the requested lengths; padding as asked."""
    a, b = build_raw(BUILD), build_raw(BUILD)
    np.testing.assert_array_equal(a.logits, b.logits)
    assert a.logits.shape == (7, 2, 4)
    assert a.input_lengths.tolist() == [6, 3] and a.target_lengths.tolist() == [3, 1]
    assert (a.logits[6:, 0] == 0).all() and (a.logits[3:, 1] == 0).all()
    peaked = build_raw({"generator": "peaked", "C": 3, "peak": 0.9,
                        "sample": [{"target": [1], "path": [1, 0]}]})
    np.testing.assert_allclose(np.exp(peaked.logits[:, 0]), [[0.05, 0.9, 0.05], [0.9, 0.05, 0.05]])
    spread = build_raw({"generator": "random", "C": 5, "spread": 300.0,
                        "sample": [{"target": [1], "T": 4}]})
    np.testing.assert_allclose(np.ptp(spread.logits[:, 0], axis=1), 300.0)
    single = build_raw({"generator": "uniform", "C": 3,
                        "sample": [{"target": [1, 1, 2], "T": "min"}]})
    assert single.input_lengths.tolist() == [4]


@pytest.mark.parametrize("transform", [
    {"transform": "move_blank", "blank": -1},
    {"transform": "move_blank", "blank": 2},
    {"transform": "padded_frames", "value": float("nan"), "extra": 2},
    {"transform": "concatenated_targets"},
    {"transform": "wide_padding", "extra": 4},
    {"transform": "index_dtype", "dtype": "int32", "also": [{"transform": "concatenated_targets"}]},
    {"transform": "upstream_weights", "weights": [2.0, -0.5]},
])
def test_transform_maps_base_answer_onto_variant(transform):
    """Brute force on the variant equals the base's brute force pushed through the variant's map."""
    base, variant = variants(BUILD, [transform])
    pb, pv = to_problem(base.raw, "float64"), to_problem(variant.raw, "float64")
    loss_b, grad_b = _losses_and_grads(pb)
    loss_v, grad_v = _losses_and_grads(pv)
    np.testing.assert_allclose(loss_v, loss_b, rtol=1e-12)
    w = variant.run_kwargs.get("grad_weights")
    expected = variant.grad_map(grad_b)
    got = grad_v if w is None else grad_v * np.asarray(w)[None, :, None]
    np.testing.assert_allclose(got, expected, atol=1e-12)


def test_variant_forms_reach_the_problem():
    """Layout and index dtype transforms survive into CTCProblem for adapters to use."""
    _, v = variants(BUILD, [{"transform": "index_dtype", "dtype": "int32",
                             "also": [{"transform": "concatenated_targets"}]}])
    p = to_problem(v.raw, "float32")
    assert (p.index_dtype, p.target_layout, p.dtype) == ("int32", "concatenated", "float32")


def test_bad_build_errors_name_the_field():
    """A build table without samples, or with a table of the wrong width, says what it expected."""
    with pytest.raises(ValueError, match="build.sample: expected a non-empty list"):
        build_raw({"generator": "random", "C": 3}, case="c")
    with pytest.raises(ValueError, match="build.C: expected an integer >= 1"):
        build_raw({"generator": "random", "sample": [{"target": [1], "T": 2}]}, case="c")
    with pytest.raises(ValueError, match="expected 'probs' or 'logits'"):
        build_raw({"generator": "table", "C": 3, "sample": [{"target": [1], "T": 2}]}, case="c")


def test_numpy_normal_replays_the_legacy_global_stream():
    """numpy_normal gives what np.random.seed(s); np.random.randn(N, T, C) gives, time-major."""
    state = np.random.get_state()
    try:
        np.random.seed(1234)
        want = np.random.randn(2, 7, 5)  # (N, T, C), as optax's CTCTest draws
    finally:
        np.random.set_state(state)
    raw = build_raw({"generator": "numpy_normal", "C": 5, "seed": 1234, "T": 7,
                     "sample": [{"target": [1, 2], "T": 5}, {"target": [3], "T": 7}]})
    assert raw.logits.shape == (7, 2, 5)
    np.testing.assert_array_equal(raw.logits, want.transpose(1, 0, 2))
    assert raw.input_lengths.tolist() == [5, 7]
