"""``compare --save-baseline`` / ``--baseline --max-change``: a change of 1e-9 in a correct
kernel is seen at a small --max-change and passes at a large one. The oracle is the planted
change itself: a copy of the NumPy implementation whose losses are scaled by 1 + 1e-9."""
import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.runtime.registry import unregister_backend

IMPLEMENTATIONS = Path(__file__).parent.parent / "implementations"
CASES = ("tf_basic", "toy_alpha_beta", "single_alignment_repeats")


@pytest.fixture
def project(tmp_path, monkeypatch):
    """A scratch project holding a copy of the NumPy CTC as ``mine.py``."""
    shutil.copy(IMPLEMENTATIONS / "numpy_ctc.py", tmp_path / "mine.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    yield tmp_path
    unregister_backend("mine:ctc_loss")


def compare(project, run, *args):
    cases = [a for c in CASES for a in ("--case", c)]
    return CliRunner().invoke(cli, ["compare", "--function", "mine:ctc_loss", "--convention",
                                    "numpy", *cases, "--no-plot", "--out", str(project / run),
                                    *args])


def change_the_kernel(project, factor: str):
    source = (project / "mine.py").read_text()
    (project / "mine.py").write_text(source.replace(
        "    return loss, grad\n", f"    return loss * {factor}, grad\n", 1))


def test_a_change_of_1e9_fails_a_small_max_change_and_passes_a_large_one(project):
    saved = compare(project, "first", "--save-baseline", "base.json")
    assert saved.exit_code == 0, saved.output
    assert "saved " in saved.output and (project / "base.json").is_file()
    same = compare(project, "again", "--baseline", "base.json")
    assert same.exit_code == 0 and "baseline ok: nothing moved" in same.output, same.output

    change_the_kernel(project, "(1 + 1e-9)")
    small = compare(project, "small", "--baseline", "base.json", "--max-change", "1e-12")
    assert small.exit_code == 1, small.output
    moved = [line for line in small.output.splitlines() if line.startswith("moved")]
    assert moved and all("mine:ctc_loss" in line and "loss" in line for line in moved)
    assert any("tf_basic" in line for line in moved)
    verdict = [line for line in small.stdout.splitlines() if line.startswith("compare ")]
    assert verdict == [small.stdout.strip().splitlines()[-1]]  # moved rows, then the verdict
    assert verdict[0].startswith("compare FAILED") and "moved from --baseline" in verdict[0]
    large = compare(project, "large", "--baseline", "base.json", "--max-change", "1e-6")
    assert large.exit_code == 0 and "baseline ok" in large.output, large.output


def test_the_baseline_is_json_one_entry_per_row_and_refuses_other_files(project):
    assert compare(project, "first", "--save-baseline", "base.json").exit_code == 0
    data = json.loads((project / "base.json").read_text())
    assert data["kind"] == "ctcbench-baseline" and data["format"] == 1
    assert all(key.startswith("mine:ctc_loss ") for key in data["rows"])
    (project / "other.json").write_text('{"rows": []}')
    res = compare(project, "refused", "--baseline", "other.json")
    assert res.exit_code == 1 and not (project / "refused").exists()
    assert res.output.strip().splitlines()[-1].startswith("Error: --baseline: expected a baseline")


def test_a_case_that_changed_is_said_and_not_compared(project):
    assert compare(project, "first", "--save-baseline", "base.json").exit_code == 0
    data = json.loads((project / "base.json").read_text())
    key = next(k for k in data["rows"] if " tf_basic " in k)
    data["rows"][key]["problems"] = "0" * 16  # as if the case had been edited since
    data["rows"][key]["loss"][0][0] += 1.0
    (project / "base.json").write_text(json.dumps(data))
    res = compare(project, "again", "--baseline", "base.json", "--max-change", "0")
    assert res.exit_code == 0 and "whose case changed since, not compared" in res.output


def test_a_baseline_of_other_rows_fails_the_gate(project):
    """A baseline none of whose rows this run has (the function renamed since, say) compares
    nothing: the gate fails, saying so, rather than passing with 'nothing moved'."""
    assert compare(project, "first", "--save-baseline", "base.json").exit_code == 0
    data = json.loads((project / "base.json").read_text())
    data["rows"] = {k.replace("mine:ctc_loss", "old:ctc_loss"): v for k, v in data["rows"].items()}
    (project / "base.json").write_text(json.dumps(data))
    res = compare(project, "again", "--baseline", "base.json")
    assert res.exit_code == 1, res.output
    assert ("baseline FAILED: none of its rows is in this run (other backends, cases or "
            "dtypes); compared 0 rows with the baseline") in res.output
    assert res.stdout.strip().splitlines()[-1].startswith("compare FAILED")
