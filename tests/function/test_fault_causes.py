"""Loss faults named by cause where an implementer reads them: ``ctcbench compare --function``'s
table, its rows and page, ``assert_ctc_conformant`` and the pytest plugin. The functions are
tests/function/faulty_losses.py: a CTC loss written apart from ctcbench's fault models, right
in ``ctc_loss`` and with one fault planted in each ``ctc_loss_<fault>``."""
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.runtime.registry import unregister_backend
from ctcbench.testing import assert_ctc_conformant

HERE = Path(__file__).parent
CASES = ("tf_basic", "toy_alpha_beta", "repeat_perfect_vs_blank", "empty_target",
         "infeasible_target", "zero_length_input", "ragged_batch", "blank_first_vs_last",
         "masked_classes", "nan_in_padded_frames")
REPEATS = ("repeated labels: your loss lets a label follow itself without a blank "
           "(matches on {n} of {n} failing samples)")
NAMES = {"repeats": "repeated labels", "trailing_blank": "no trailing blank",
         "leading_blank": "no leading blank", "log_zero": "finite log-zero",
         "zero_length": "zero-length input", "empty_target": "empty target",
         "probs": "probabilities as log-probs", "logits": "logits not normalised",
         "per_target": "divided by target length", "per_input": "divided by input length",
         "batch_sum": "batch sum", "blank_zero": "blank argument ignored",
         "blank_last": "blank as C-1", "past_length": "targets read past their length",
         "padded_frames": "padded frames read", "grad_log_probs": "gradient w.r.t. log-probs",
         "nan_softmax": "NaN from a division by the softmax"}


@pytest.fixture(autouse=True)
def beside_the_losses(monkeypatch):
    """Run in tests/function, the way a user runs ctcbench beside their module."""
    monkeypatch.chdir(HERE)
    monkeypatch.syspath_prepend(str(HERE))
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    yield
    for name in ["ctc_loss", *(f"ctc_loss_{f}" for f in NAMES)]:
        try:
            unregister_backend(f"faulty_losses:{name}")
        except KeyError:
            pass


def compare(out, name, *cases, fmt="table"):
    args = ["compare", "--function", f"faulty_losses:{name}", "--convention", "numpy",
            "--dtype", "float64", "--no-plot", "--out", str(out), "--format", fmt]
    return CliRunner().invoke(cli, args + [a for c in cases for a in ("--case", c)])


def test_the_table_ends_with_the_cause_and_each_failing_row_leads_with_it(tmp_path):
    """The cause line just before the verdict; the reasons, the cause column, the page and
    the page made again by ``ctcbench report`` all say it."""
    res = compare(tmp_path / "run", "ctc_loss_repeats", "toy_alpha_beta",
                  "repeat_perfect_vs_blank", "tf_basic")
    assert res.exit_code == 1, res.output
    lines = res.output.strip().splitlines()
    # 3 samples of repeat_perfect_vs_blank and tf_basic's second one have a repeated label
    assert lines[-2] == REPEATS.format(n=4)
    assert lines[-1].startswith("compare FAILED: 2 mismatch, 1 ok")
    rows = json.loads((tmp_path / "run" / "rows.json").read_text())
    failing = {r["case"]: r for r in rows if r["status"] == "mismatch"}
    assert set(failing) == {"repeat_perfect_vs_blank", "tf_basic"}
    assert all(r["reason"].startswith("repeated labels | loss vs ") for r in failing.values())
    assert all(r["cause"] == "repeated labels" for r in failing.values())
    ok = [r for r in rows if r["status"] == "ok"]
    assert ok[0]["cause"] is None and "|" not in (ok[0]["reason"] or "")
    page = (tmp_path / "run" / "report.html").read_text()
    assert REPEATS.format(n=4) in page and "repeated labels | loss vs" in page
    again = CliRunner().invoke(cli, ["report", str(tmp_path / "run"), "--out",
                                     str(tmp_path / "again.html")])
    assert again.exit_code == 0, again.output
    assert REPEATS.format(n=4) in (tmp_path / "again.html").read_text()


def test_the_json_summary_holds_the_cause_lines_and_right_code_gets_none(tmp_path):
    """No false alarm: the right loss passes with no cause, in the summary or any row."""
    res = compare(tmp_path / "run", "ctc_loss", *CASES[:4], fmt="json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    assert out["summary"]["causes"] == []
    assert all(r["cause"] is None for r in out["rows"])


def test_assert_ctc_conformant_says_the_cause_first():
    """The cause line leads the message, then each failing row led by the cause's name."""
    with pytest.raises(AssertionError) as info:
        assert_ctc_conformant("faulty_losses:ctc_loss_per_target", convention="numpy",
                              cases=["toy_alpha_beta", "tf_basic"], dtypes=["float64"])
    lines = str(info.value).splitlines()
    assert lines[1] == ("  cause: divided by target length: your loss is divided by the "
                        "target length (torch's reduction='mean' does that before averaging; "
                        "the per-sample loss must not) (matches on 3 of 3 failing samples)")
    assert lines[2].startswith("  tf_basic [float64] mismatch")
    assert "divided by target length | loss vs" in lines[2]


def test_the_pytest_plugin_says_the_cause_on_the_failing_item_and_at_the_end(tmp_path):
    """Run as an implementer runs it, in a project holding a copy of the planted losses."""
    shutil.copy(HERE / "faulty_losses.py", tmp_path / "mine.py")
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "--ctcbench-convention",
         "numpy", "--ctcbench-function", "mine:ctc_loss_repeats", "--ctcbench-case",
         "repeat_perfect_vs_blank", "--ctcbench-case", "toy_alpha_beta", "--ctcbench-dtype",
         "float64"], cwd=tmp_path, capture_output=True, text=True, timeout=600,
        env={"PATH": "/usr/bin:/bin", "CTCBENCH_THREADS": "1"})
    assert done.returncode == 1, done.stdout[-3000:]
    line = REPEATS.format(n=3)
    assert f"    cause: {line}" in done.stdout  # on the failing item
    summary = done.stdout.split("ctcbench: causes")[1]
    assert f"mine:ctc_loss_repeats: {line}" in summary


@pytest.mark.long
@pytest.mark.parametrize("fault", list(NAMES))
def test_each_planted_fault_is_named_by_the_command(tmp_path, fault):
    """The command on cases where every fault shows, both dtypes: exactly the planted cause,
    explaining every failing sample."""
    args = ["compare", "--function", f"faulty_losses:ctc_loss_{fault}", "--convention",
            "numpy", "--no-plot", "--out", str(tmp_path / "run"), "--format", "json"]
    res = CliRunner().invoke(cli, args + [a for c in CASES for a in ("--case", c)]
                             + ["--case", "peaked_logits_spread300"])
    assert res.exit_code == 1, res.output
    causes = json.loads(res.stdout)["summary"]["causes"]
    assert len(causes) == 1 and causes[0].startswith(f"{NAMES[fault]}: "), causes
    explained, failing = causes[0].rsplit("(matches on ", 1)[1].split(" failing")[0].split(" of ")
    assert explained == failing


@pytest.mark.long
def test_the_right_loss_gets_no_cause_by_the_command(tmp_path):
    """No false alarm: the right loss passes the same cases (both dtypes), naming nothing."""
    res = CliRunner().invoke(cli, ["compare", "--function", "faulty_losses:ctc_loss",
                                   "--convention", "numpy", "--no-plot", "--out",
                                   str(tmp_path / "run"), "--format", "json"]
                             + [a for c in CASES for a in ("--case", c)])
    assert res.exit_code == 0, res.output
    assert json.loads(res.stdout)["summary"]["causes"] == []
