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


def test_two_different_answers_are_found_unless_declared(register_backends, tmp_path):
    """Each problem runs twice: a gradient that differs by 1e-13 between calls is found at once;
    declared as nondeterministic within 1e-9, the same backend fuzzes clean."""
    register_backends("jitter", "wrong_backends:Nondeterministic")
    register_backends("jitter-declared", "wrong_backends:DeclaredNondeterministic")
    found = fuzz("jitter", budget=10, seed=1, out=tmp_path / "a", progress=False).summary
    assert found["found"] and found["what"].startswith("deterministic: a second call gave another")
    clean = fuzz("jitter-declared", budget=3, seed=1, out=tmp_path / "b", progress=False).summary
    assert not clean["found"] and clean["tried"] > 0

