"""Case format 2: each feature on a small case file written here, with a variant that must fail."""
from __future__ import annotations

import math

import numpy as np
import pytest

from ctcbench.caselib.library import load_cases
from ctcbench.caselib.stdrandom import mt19937_raw, uniform_int, uniform_real
from ctcbench.compare.run import compare
from ctcbench.core.problem import CTCProblem

HEAD = """
[[case]]
name = "v2"
format = 2
description = "a format-2 feature"
provenance = "test"
dtypes = ["float64"]
"""
# T=2, C=3, target [1]: paths 1 1, 1 _, _ 1 over softmax of these logits
TABLE = """
[case.build]
generator = "table"
{build}
[[case.build.sample]]
target = [1]
logits = [[0.5, 1.0, -0.2], [0.1, 0.3, 0.9]]
[[case.build.sample]]
target = [2]
logits = [[0.0, 0.2, 0.4], [1.0, -1.0, 0.0]]
"""


def _brute(x, target):
    """-log sum over the paths of a length-1 target in 2 frames (closed form)."""
    p = np.exp(x) / np.exp(x).sum(axis=1, keepdims=True)
    k = target
    return -math.log(p[0, k] * p[1, k] + p[0, k] * p[1, 0] + p[0, 0] * p[1, k])


def _run(tmp_path, text, backends=("numpy", "torch")):
    (tmp_path / "cases").mkdir(parents=True, exist_ok=True)
    (tmp_path / "cases" / "v2.toml").write_text(text)
    result = compare(list(backends), case_dirs=[tmp_path / "cases"], out=tmp_path / "run")
    return result.rows


def _statuses(rows):
    return {(r["backend"], r["status"]) for r in rows.to_dict("records")}


def test_mt19937_matches_the_cxx_standard_value():
    """std::mt19937 default seed 5489: the 10000th output is 4123659995 (C++ [rand.predef])."""
    assert int(mt19937_raw(5489, 10000)[-1]) == 4123659995


def test_uniform_real_double_is_two_draws_over_2_64():
    """uniform_real_distribution<double>: (g1 + g2 * 2**32) / 2**64 from the raw outputs."""
    g = mt19937_raw(0, 2)
    assert uniform_real(0, 1)[0] == (float(g[0]) + float(g[1]) * 2.0**32) / 2.0**64


def test_uniform_int_is_lemire_on_one_draw():
    """uniform_int_distribution(1, 14): (g * 14) >> 32 + 1 when no redraw is needed."""
    g = int(mt19937_raw(1, 1)[0])
    assert uniform_int(1, 1, 1, 14)[0] == 1 + (g * 14 >> 32)


def test_api_unbatched_and_negative_blank():
    """(T, C) logits, 1-D target and scalar lengths are one sample; blank -1 is C - 1."""
    p = CTCProblem(np.zeros((4, 3)), [1, 0], 4, 2, blank=-1)
    assert p.shape == (4, 1, 3, 2) and p.blank == 2 and p.unbatched
    with pytest.raises(ValueError, match=r"blank: expected an index in \[-3, 3\)"):
        CTCProblem(np.zeros((4, 1, 3)), [[1]], [4], [1], blank=-4)


def test_expected_error_ok_and_wrong_regex_mismatch(tmp_path):
    """An expected error gives one 'input-check' row: ok when type and message match."""
    case = HEAD + """
[case.build]
generator = "arrays"
shape = [2, 1, 3]
targets = [[0]]
input_lengths = [2]
target_lengths = [1]
[case.expect]
error = {{ type = "ValueError", match = "{match}" }}
"""
    rows = _run(tmp_path, case.format(match="no label equal to blank"))
    assert _statuses(rows) == {("input-check", "ok")}
    rows = _run(tmp_path / "b", case.format(match="something else"))
    assert _statuses(rows) == {("input-check", "mismatch")}


@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
def test_reduction_checked_through_reduce_loss_and_torch(tmp_path, reduction):
    """Reduced loss and its gradient pass for numpy and torch (torch also by its own reduction)."""
    rows = _run(tmp_path, HEAD + TABLE.format(build="") + f"""
[case.expect]
oracle = "brute_force"
reduction = "{reduction}"
zero_infinity = true
""")
    assert _statuses(rows) == {("numpy", "ok"), ("torch", "ok")}


def test_finite_difference_passes_and_a_wrong_gradient_fails(tmp_path, register_backends):
    """Central differences agree with numpy's gradient; a backend with a halved gradient fails."""
    from ctcbench.backends.numpy_ref import NumpyBackend

    class Halved:
        def run(self, problem):
            r = NumpyBackend().run(problem)
            r.grad_logits = r.grad_logits * 0.5
            return r
    register_backends("halved", Halved)
    text = HEAD + TABLE.format(build="") + """
[case.expect]
oracle = "finite_difference"
[case.expect.finite_difference]
coords = [[0, 0, 1], [1, 1, 2]]
"""
    rows = _run(tmp_path, text, backends=("numpy", "halved")).set_index("backend")
    assert rows.loc["numpy", "status"] == "ok"
    assert rows.loc["halved", "status"] == "mismatch"
    assert "finite_difference" in rows.loc["halved", "reason"]


def test_determinism_fails_for_a_backend_that_drifts(tmp_path, register_backends):
    """deterministic = true: a backend whose second call differs by one ulp fails."""
    from ctcbench.backends.numpy_ref import NumpyBackend

    class Drifts:
        calls = 0

        def run(self, problem):
            r = NumpyBackend().run(problem)
            Drifts.calls += 1
            r.loss = np.nextafter(r.loss, np.inf) if Drifts.calls % 2 == 0 else r.loss
            return r
    register_backends("drifts", Drifts)
    rows = _run(tmp_path, HEAD + TABLE.format(build="") + """
[case.expect]
oracle = "brute_force"
deterministic = true
""", backends=("numpy", "drifts")).set_index("backend")
    assert rows.loc["numpy", "status"] == "ok"
    assert "deterministic" in rows.loc["drifts", "reason"]


def test_determinism_allows_what_a_backend_declares(tmp_path, register_backends):
    """deterministic = true: a backend declaring nondeterministic = 1e-9 passes with a second
    call 1e-13 off; the same without the trait fails."""
    register_backends("jitter", "wrong_backends:Nondeterministic")
    register_backends("jitter-declared", "wrong_backends:DeclaredNondeterministic")
    rows = _run(tmp_path, HEAD + TABLE.format(build="") + """
[case.expect]
oracle = "brute_force"
deterministic = true
""", backends=("jitter", "jitter-declared")).set_index("backend")
    assert rows.loc["jitter-declared", "status"] == "ok"
    assert rows.loc["jitter", "status"] == "mismatch"
    assert rows.loc["jitter", "reason"].startswith("deterministic: a second call gave another grad")


def test_samples_check_only_the_named_ones(tmp_path):
    """samples = [1]: a published value for sample 1 only; a wrong one fails."""
    want = _brute(np.array([[0.0, 0.2, 0.4], [1.0, -1.0, 0.0]]), 2)
    case = HEAD + TABLE.format(build="") + """
[case.expect]
oracle = "published"
samples = [1]
loss = [{loss}]
"""
    assert _statuses(_run(tmp_path, case.format(loss=repr(want)))) == {("numpy", "ok"),
                                                                       ("torch", "ok")}
    rows = _run(tmp_path / "b", case.format(loss=repr(want + 0.1)))
    assert set(rows["status"]) == {"mismatch"}


def test_grad_rtol_widens_the_gradient_tolerance(tmp_path, register_backends):
    """A gradient 1% off fails at grad_atol alone and passes with grad_rtol = 0.02."""
    from ctcbench.backends.numpy_ref import NumpyBackend

    class OnePercent:
        def run(self, problem):
            r = NumpyBackend().run(problem)
            r.grad_logits = r.grad_logits * 1.01
            return r
    register_backends("onepct", OnePercent)
    case = HEAD + TABLE.format(build="") + """
[case.expect]
oracle = "brute_force"
[case.tolerance.float64]
grad_atol = 1e-9
grad_rtol = {rtol}
"""
    assert set(_run(tmp_path, case.format(rtol=0.0), ("onepct",))["status"]) == {"mismatch"}
    assert set(_run(tmp_path / "b", case.format(rtol=0.02), ("onepct",))["status"]) == {"ok"}


def test_unbatched_and_blank_minus_one_case(tmp_path):
    """unbatched = true with blank = -1: the closed form with the blank as the last class."""
    x = np.array([[1.0, 0.5, -0.2], [0.3, 0.1, 0.9]])
    want = _brute(x[:, [2, 0, 1]], 1)  # blank (class 2) moved first, label 0 -> index 1
    rows = _run(tmp_path, HEAD + f"""
[case.build]
generator = "table"
blank = -1
unbatched = true
[[case.build.sample]]
target = [0]
logits = {x.tolist()}
[case.expect]
oracle = "published"
loss = [{want!r}]
""")
    assert set(rows["status"]) == {"ok"}


def test_invariants_name_the_broken_one(tmp_path, register_backends):
    """A gradient with a constant added to every entry breaks the row-sum invariant."""
    from ctcbench.backends.numpy_ref import NumpyBackend

    class Shifted:
        def run(self, problem):
            r = NumpyBackend().run(problem)
            r.grad_logits = r.grad_logits + 0.1 * problem.frame_mask[..., None]
            return r
    register_backends("shifted", Shifted)
    rows = _run(tmp_path, HEAD + TABLE.format(build="") + """
[case.expect]
oracle = "reference"
""", ("shifted",))
    assert "gradient row sums to 0" in rows["reason"].iloc[0]


def test_peer_suites_load_by_default():
    """The peers' cases (cases/peers/) are part of the built-in library: at least 50."""
    peers = [c for c in load_cases() if c.folder == "peers"]
    assert {c.family for c in peers} == {"warpctc", "tensorflow", "pytorch", "optax", "flashlight"}
    assert len(peers) >= 50
