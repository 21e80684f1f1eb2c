"""The pytest plugin, run as an implementer runs it: ``pytest --ctcbench-function`` in their
project (a scratch folder holding a copy of the NumPy CTC and its planted-bug twin). The
oracle is the case library's known answers; a repeat case must fail the bug, a case without
repeated labels must not."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

IMPLEMENTATIONS = Path(__file__).parent.parent / "implementations"
CASES = ["--ctcbench-case", "toy_alpha_beta", "--ctcbench-case", "repeat_perfect_vs_blank",
         "--ctcbench-case", "tf_basic", "--ctcbench-dtype", "float64"]


@pytest.fixture
def project(tmp_path):
    shutil.copy(IMPLEMENTATIONS / "numpy_ctc.py", tmp_path / "mine.py")
    return tmp_path


def pytest_in(project, *args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-rfExX",
                           "--ctcbench-convention", "numpy", *args], cwd=project,
                          capture_output=True, text=True, timeout=600,
                          env={"PATH": "/usr/bin:/bin", "CTCBENCH_THREADS": "1"})


def test_the_cases_are_tests_named_by_case(project):
    done = pytest_in(project, "--ctcbench-function", "mine:ctc_loss", *CASES, "-v")
    assert done.returncode == 0, done.stdout[-3000:]
    for case in ("toy_alpha_beta", "repeat_perfect_vs_blank", "tf_basic"):
        assert f"mine:ctc_loss::{case}[float64] PASSED" in done.stdout


def test_the_planted_bug_fails_its_repeat_case_with_the_command_to_reproduce(project):
    done = pytest_in(project, "--ctcbench-function", "mine:ctc_loss_skips_repeats", *CASES)
    assert done.returncode == 1
    assert re.search(r"FAILED mine:ctc_loss_skips_repeats::repeat_perfect_vs_blank\[float64\]",
                     done.stdout), done.stdout[-3000:]
    assert "toy_alpha_beta[float64]" not in done.stdout.split("short test summary")[-1]
    assert ("reproduce: ctcbench compare --function mine:ctc_loss_skips_repeats "
            "--convention numpy --case repeat_perfect_vs_blank --dtype float64") in done.stdout


def test_k_selects_and_known_issues_are_xfail_with_their_reason(project):
    (project / "known.toml").write_text(
        'format = 1\n[[issue]]\nbackend = "mine:ctc_loss_skips_repeats"\n'
        'cases = ["repeat_*"]\ndtypes = ["*"]\nreason = "we let equal labels merge"\n'
        'seen_with = "mine 0.1"\n')
    done = pytest_in(project, "--ctcbench-function", "mine:ctc_loss_skips_repeats", *CASES,
                     "--ctcbench-known-issues", "known.toml", "-k", "perfect or toy")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "1 passed" in done.stdout and "1 xfailed" in done.stdout
    assert "we let equal labels merge" in done.stdout


def test_a_mistake_in_the_option_is_one_usage_error(project):
    done = pytest_in(project, "--ctcbench-function", "mine:no_such_function")
    assert done.returncode == 4  # pytest's usage error
    assert "--ctcbench-function: expected a name 'no_such_function' in mine" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_ctc_case_fixture_gives_each_case_with_its_known_answer(project):
    (project / "test_mine.py").write_text(
        "import numpy as np\nfrom mine import ctc_loss\n\n"
        "def test_matches_the_library(ctc_case):\n"
        "    p = ctc_case.problem\n"
        "    loss, _ = ctc_loss(p.clean_logits(), p.targets, p.input_lengths, p.target_lengths, p.blank % p.shape[2])\n"
        "    np.testing.assert_allclose(loss, ctc_case.loss, rtol=1e-5)  # published to 6 digits\n")
    done = pytest_in(project, "test_mine.py", *CASES, "-v")
    assert done.returncode == 0, done.stdout[-3000:]
    assert "test_matches_the_library[tf_basic[float64]] PASSED" in done.stdout
