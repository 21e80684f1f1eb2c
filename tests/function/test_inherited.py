"""A ``--function`` wrapping a framework is told which of that framework's known issues a
failing row is, and ``--accept-known FRAMEWORK`` (the pytest plugin's
``--ctcbench-accept-known``, ``assert_ctc_conformant(accept_known=)``) makes those rows known.
The functions are real wrappers of torch's and optax's kernels (tests/function/wrapped); the
oracles are the case library's answers, the frameworks' own calls and the upstream issues
the atlas and cases/known_issues.toml cite."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.compare.inherited import FEATURES
from ctcbench.runtime.malformed import PROBES
from ctcbench.runtime.registry import unregister_backend

WRAPPED = Path(__file__).parent / "wrapped"
TORCH_ISSUES = ("infeasible_target", "masked_classes")  # NaN gradients: pytorch#14335, -inf
TORCH_14335 = "https://github.com/pytorch/pytorch/issues/14335"
NEG_INF = "docs/atlas.md: torch-nan-gradient-neg-inf-logit"


@pytest.fixture(autouse=True)
def beside_the_functions(monkeypatch):
    monkeypatch.chdir(WRAPPED)
    monkeypatch.syspath_prepend(str(WRAPPED))
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    yield
    for name in ("torch_wrappers:ctc_loss", "torch_wrappers:ctc_loss_zero_infinity",
                 "torch_wrappers:ctc_loss_drops_blank", "optax_wrappers:ctc_loss"):
        try:
            unregister_backend(name)
        except KeyError:
            pass


def compare(tmp_path, target, cases, *args, dtypes=("float64",)):
    words = [w for c in cases for w in ("--case", c)] + [w for d in dtypes for w in ("--dtype", d)]
    res = CliRunner().invoke(cli, ["compare", "--function", target, *words, *args, "--no-plot",
                                   "--format", "json", "--out", str(tmp_path / "run")])
    assert "Traceback" not in res.output, res.output
    rows = json.loads(res.stdout)["rows"]
    return res.exit_code, {r["case"]: r for r in rows if r["backend"] == target}


def test_a_torch_wrapper_is_told_which_known_issue_of_torch_each_row_is(tmp_path):
    code, rows = compare(tmp_path, "torch_wrappers:ctc_loss", (*TORCH_ISSUES, "toy_alpha_beta"))
    assert code == 1
    assert rows["toy_alpha_beta"]["status"] == "ok"
    for case, where in zip(TORCH_ISSUES, (TORCH_14335, NEG_INF)):
        row = rows[case]
        assert row["status"] == "mismatch", row
        assert row["reason"].startswith("same as torch's F.ctc_loss: ") and where in row["reason"]
        assert "--accept-known torch accepts it" in row["reason"]


def test_accept_known_torch_makes_those_rows_known_and_the_run_pass(tmp_path):
    code, rows = compare(tmp_path, "torch_wrappers:ctc_loss", TORCH_ISSUES,
                         "--accept-known", "torch")
    assert code == 0
    for case in TORCH_ISSUES:
        assert rows[case]["status"] == "known"
        assert rows[case]["reason"].startswith("known mismatch: same as torch's F.ctc_loss")


def test_zero_infinity_is_said_as_torchs_setting_and_not_accepted(tmp_path):
    """zero_infinity=True scores a target with no path 0 (torch's documentation): not what
    the case's brute force answers (inf), and no bug of torch's to accept."""
    code, rows = compare(tmp_path, "torch_wrappers:ctc_loss_zero_infinity",
                         ("infeasible_target", "masked_classes"), "--accept-known", "torch")
    assert code == 1
    assert rows["infeasible_target"]["status"] == "mismatch"
    assert rows["infeasible_target"]["reason"].startswith("torch's zero_infinity=True convention")
    # masked_classes: -inf logits (torch's NaN gradient) and an infeasible sample: both said
    reason = rows["masked_classes"]["reason"]
    assert reason.startswith("same as torch's F.ctc_loss with zero_infinity=True: ") \
        and NEG_INF in reason and "zero_infinity=True convention" in reason, reason
    assert rows["masked_classes"]["status"] == "mismatch"


def test_a_wrappers_own_bug_is_never_said_to_be_torchs(tmp_path):
    """It drops the blank argument: on blank 2 it is not what torch computes."""
    code, rows = compare(tmp_path, "torch_wrappers:ctc_loss_drops_blank",
                         ("tf_dense_blank_index_2",), "--accept-known", "torch",
                         dtypes=("float32",))
    assert code == 1
    row = rows["tf_dense_blank_index_2"]
    assert row["status"] == "mismatch" and "same as" not in row["reason"], row


def test_a_misspelled_framework_is_one_line_naming_the_option(tmp_path):
    res = CliRunner().invoke(cli, ["compare", "--function", "torch_wrappers:ctc_loss",
                                   "--accept-known", "torhc", "--out", str(tmp_path / "run")])
    assert res.exit_code in (1, 2) and "Traceback" not in res.output
    line = res.output.strip().splitlines()[-1]
    assert "--accept-known" in line and "did you mean 'torch'" in line, line


def test_every_feature_is_an_atlas_probe():
    """The atlas names probes of ctcbench.runtime.malformed: a feature of another name
    would never match an entry."""
    assert set(FEATURES) <= {p.name for p in PROBES}


def test_the_assert_accepts_torchs_known_issues_when_asked():
    from ctcbench.testing import assert_ctc_conformant
    with pytest.raises(AssertionError, match="same as torch's F.ctc_loss"):
        assert_ctc_conformant("torch_wrappers:ctc_loss", cases=TORCH_ISSUES, dtypes=["float64"])
    assert assert_ctc_conformant("torch_wrappers:ctc_loss", cases=TORCH_ISSUES,
                                 dtypes=["float64"], accept_known=["torch"]) is None


@pytest.mark.long
def test_the_pytest_plugin_makes_them_xfail(tmp_path):
    cases = [w for c in TORCH_ISSUES for w in ("--ctcbench-case", c)]
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rxX",
                           "--ctcbench-function", "torch_wrappers:ctc_loss", *cases,
                           "--ctcbench-dtype", "float64", "--ctcbench-accept-known", "torch"],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "CTCBENCH_THREADS": "1",
                               "PYTHONPATH": str(WRAPPED)})
    assert done.returncode == 0, done.stdout[-3000:]
    assert "2 xfailed" in done.stdout and TORCH_14335 in done.stdout, done.stdout[-3000:]
    wrong = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                            "--ctcbench-function", "torch_wrappers:ctc_loss",
                            "--ctcbench-accept-known", "torhc"],
                           cwd=tmp_path, capture_output=True, text=True, timeout=600,
                           env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(WRAPPED)})
    assert wrong.returncode == 4 and "--ctcbench-accept-known: expected one of" in wrong.stderr


@pytest.mark.long
@pytest.mark.skipif(importlib.util.find_spec("optax") is None,
                    reason="needs jax and optax (pip install 'ctcbench[jax]')")
def test_a_re_export_of_optax_inherits_optax_1771_and_passes_with_accept_known(tmp_path):
    """optax#1771: a float32 loss below 0 for a near-certain alignment; and what optax does
    with NaN in padded frames, which ctcbench's optax adapter never shows it."""
    cases = ("optax_negative_loss_near_certain", "nan_in_padded_frames")
    code, rows = compare(tmp_path, "optax_wrappers:ctc_loss", cases, dtypes=("float32",))
    assert code == 1
    negative = rows["optax_negative_loss_near_certain"]
    assert negative["status"] == "mismatch" and negative["reason"].startswith(
        "same as optax's optax.ctc_loss: ") and \
        "https://github.com/google-deepmind/optax/issues/1771" in negative["reason"]
    assert "clears_padded_frames" in rows["nan_in_padded_frames"]["reason"]
    code, rows = compare(tmp_path / "accepted", "optax_wrappers:ctc_loss", cases,
                         "--accept-known", "optax", dtypes=("float32",))
    assert code == 0 and {r["status"] for r in rows.values()} == {"known"}


@pytest.mark.long
def test_torchs_kernel_passes_the_whole_library_with_accept_known_torch(tmp_path):
    """docs/ci.md's measure: a plain binding of F.ctc_loss fails only where torch's kernel is
    known to (NaN gradients of infeasible targets, pytorch#14335, and of -inf logits)."""
    res = CliRunner().invoke(cli, ["compare", "--function", "torch_wrappers:ctc_loss",
                                   "--accept-known", "torch", "--no-plot", "--format", "json",
                                   "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output[-3000:]
    rows = [r for r in json.loads(res.stdout)["rows"] if r["backend"] == "torch_wrappers:ctc_loss"]
    known = {r["case"] for r in rows if r["status"] == "known"}
    assert known == {"infeasible_target", "masked_classes", "torch_zero_infinity_sum",
                     "warpctc_inf_test_neginf"}
    assert {r["status"] for r in rows} <= {"ok", "known", "unsupported"}
