"""ctcbench.fuzz.run: wrong backends are found and shrunk to small cases that `compare` fails
(the `fuzz` command itself: tests/cli/test_cli_fuzz.py)."""
from __future__ import annotations

import json
import os

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.fuzz.run import fuzz

WRONG = {"wrong-repeats": "wrong_backends:MergesRepeats",
         "wrong-lengths": "wrong_backends:IgnoresInputLengths",
         "wrong-underflow": "wrong_backends:ProbabilitySpace"}


@pytest.fixture
def wrong_backends(monkeypatch, register_backends):
    """The wrong backends registered for this test only."""
    for name, path in WRONG.items():
        register_backends(name, path)
    return WRONG


@pytest.mark.long
@pytest.mark.parametrize("name", sorted(WRONG))
def test_wrong_backend_is_found_shrunk_and_fails_compare(name, wrong_backends, tmp_path):
    """Within a 60 s budget each wrong backend is found, shrunk to one sample of few labels, and
    the case file written for it fails `compare` for that backend while the reference passes it."""
    found = fuzz(name, budget=60, seed=1, out=tmp_path / "run", progress=False).summary
    assert found["found"] and found["tried"] > 0
    size = found["size"]
    assert size["N"] == 1 and size["L"] <= 2 and size["C"] <= 3
    if name != "wrong-underflow":  # underflow needs long inputs: ~1075 frames for C = 2
        assert size["T"] <= 4
    cases = os.path.dirname(found["case_file"])
    wrong = CliRunner().invoke(cli, ["compare", "--cases", cases, "--backend", name, "--no-plot",
                                     "--format", "json", "--out", str(tmp_path / "c1")])
    assert wrong.exit_code == 1, wrong.output
    assert json.loads(wrong.stdout)["summary"]["failing_cases"] == [f"fuzz_{name.replace('-', '_')}"]
    right = CliRunner().invoke(cli, ["compare", "--cases", cases, "--backend", "numpy", "--no-plot",
                                     "--format", "json", "--out", str(tmp_path / "c2")])
    assert right.exit_code == 0, right.output


def test_a_loss_below_zero_is_found(register_backends, tmp_path):
    """A loss 1e-7 low, inside float32's tolerance: fuzz finds it below 0 and says so."""
    register_backends("loss-below-zero", "wrong_backends:LossBelowZero")
    found = fuzz("loss-below-zero", budget=20, seed=1, out=tmp_path / "run", progress=False).summary
    assert found["found"] and found["dtype"] == "float32"
    assert found["what"].startswith("invariant broken: loss below 0: got")


@pytest.mark.long
def test_two_different_answers_are_found_unless_declared(register_backends, tmp_path):
    """Each problem runs twice: a gradient that differs by 1e-13 between calls is found at once;
    declared as nondeterministic within 1e-9, the same backend fuzzes clean."""
    register_backends("jitter", "wrong_backends:Nondeterministic")
    register_backends("jitter-declared", "wrong_backends:DeclaredNondeterministic")
    found = fuzz("jitter", budget=10, seed=1, out=tmp_path / "a", progress=False).summary
    assert found["found"] and found["what"].startswith("deterministic: a second call gave another")
    clean = fuzz("jitter-declared", budget=3, seed=1, out=tmp_path / "b", progress=False).summary
    assert not clean["found"] and clean["tried"] > 0


@pytest.mark.long
def test_a_backend_differing_on_some_calls_only_fails_compare_on_its_case(register_backends,
                                                                         tmp_path):
    """A backend whose every fourth call differs: the case fuzz writes asks for determinism
    over as many calls as showed it, and compare --cases fails it as fuzz did (two calls in
    a row may agree, so a plain second call would not)."""
    import tomllib
    register_backends("sometimes", "wrong_backends:SometimesDifferent")
    found = fuzz("sometimes", budget=20, seed=1, out=tmp_path / "run", progress=False).summary
    assert found["found"] and found["what"].startswith("deterministic: a second call")
    expect = tomllib.loads(open(found["case_file"]).read())["case"][0]["expect"]
    assert expect["deterministic"] is True and 4 <= expect["calls"] <= 20
    cases = os.path.dirname(found["case_file"])
    replay = CliRunner().invoke(cli, ["compare", "--cases", cases, "--backend", "sometimes",
                                      "--no-plot", "--format", "json",
                                      "--out", str(tmp_path / "c")])
    assert replay.exit_code == 1, replay.output
    rows = json.loads(replay.stdout)["rows"]
    assert [r["reason"] for r in rows if r["status"] == "mismatch"][0].startswith(
        "deterministic: a second call gave another grad")


@pytest.mark.long
def test_a_failure_past_256_labels_shrinks_to_257(register_backends, tmp_path):
    """A backend wrong only past 256 labels is found among the boundary sizes and shrunk to the
    smallest target length that still fails, 257 (not to a small problem it gets right)."""
    register_backends("wrong-past-256", "wrong_backends:WrongPastL256")
    found = fuzz("wrong-past-256", budget=30, seed=1, out=tmp_path / "run", progress=False).summary
    assert found["found"], found
    assert found["size"]["L"] == 257 and found["size"]["N"] == 1
    assert found["what"].startswith("loss vs")
    cases = os.path.dirname(found["case_file"])  # a seeded case file, rebuilt bit for bit
    wrong = CliRunner().invoke(cli, ["compare", "--cases", cases, "--backend", "wrong-past-256",
                                     "--no-plot", "--out", str(tmp_path / "c")])
    assert wrong.exit_code == 1, wrong.output


def test_boundary_draws_stay_within_the_work_cap():
    """However far a boundary draw reaches, one problem costs at most WORK_CAP; and the draws do
    reach past 256 labels, 1024 frames, 256 classes and 32 samples."""
    from hypothesis import HealthCheck, given, settings
    from ctcbench.fuzz.problems import WORK_CAP, boundary_builds, size, work
    reached = {"T": 0, "L": 0, "C": 0, "N": 0}

    @settings(max_examples=300, deadline=None, suppress_health_check=list(HealthCheck),
              database=None, derandomize=True)
    @given(boundary_builds())
    def draw(drawn):
        build, _ = drawn
        assert work(build) <= WORK_CAP
        for k in reached:
            reached[k] = max(reached[k], size(build)[k])
    draw()
    assert reached["L"] > 256 and reached["T"] > 1024 and reached["C"] > 256 and reached["N"] > 32


@pytest.mark.filterwarnings("error::hypothesis.errors.HypothesisDeprecationWarning")
def test_the_strategies_draw_through_hypothesis_only():
    """No strategy moves the process-wide ``random`` state (hypothesis turns that into a
    deprecation warning, an error here): the warnings a Dask worker showed came from Dask's
    own threads, which ``fuzz.search`` silences for that reason only."""
    import random

    from hypothesis import HealthCheck, given, settings, strategies as st
    from ctcbench.fuzz.problems import boundary_builds, builds
    before = random.getstate()

    @settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck),
              database=None, derandomize=True)
    @given(st.one_of(builds(("float64", "float32")), boundary_builds(("float64",))))
    def draw(drawn):
        assert isinstance(drawn[0], dict)
    draw()
    assert random.getstate() == before


def test_labels_past_255_are_drawn(register_backends, tmp_path):
    """A backend storing labels in 8 bits is found, on a problem with more than 256 classes."""
    register_backends("labels-uint8", "wrong_backends:LabelsAsUint8")
    found = fuzz("labels-uint8", budget=30, seed=1, out=tmp_path / "run", progress=False).summary
    assert found["found"] and found["size"]["C"] > 256, found


@pytest.mark.long
def test_float16_is_judged_by_its_round_off(register_backends, tmp_path):
    """--dtype float16: the exact answer rounded to float16 fuzzes clean (its error is within
    the float16 bound); 5% off is found."""
    register_backends("half", "wrong_backends:HalfPrecision")
    register_backends("half-off", "wrong_backends:HalfPrecisionOff")
    clean = fuzz("half", budget=3, seed=1, dtypes=["float16"], out=tmp_path / "a",
                 progress=False).summary
    assert not clean["found"] and clean["tried"] > 0, clean
    found = fuzz("half-off", budget=10, seed=1, dtypes=["float16"], out=tmp_path / "b",
                 progress=False).summary
    assert found["found"] and found["dtype"] == "float16"
    assert found["what"].startswith("loss vs"), found


def test_a_reference_that_refuses_a_problem_leaves_it_unjudged():
    """--against torch refuses a logit of -inf (UnsupportedProblem): that problem is not
    judged, rather than the search ending in the reference's error."""
    import numpy as np

    from ctcbench.caselib.builders import problem_of
    from ctcbench.fuzz.judge import judge
    from ctcbench.runtime.registry import get_backend
    build = {"generator": "table",  # probability 0 of class 2 in every frame: logit -inf
             "sample": [{"target": [1], "probs": [[0.5, 0.5, 0.0]] * 3}]}
    assert np.isneginf(problem_of(build, "float64").logits).any()
    assert judge(get_backend("numpy"), get_backend("torch"), build, "float64") is None
