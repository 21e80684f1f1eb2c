"""`ctcbench compare`: the CI gate over the whole library, and a wrong plugin that it must catch."""
from __future__ import annotations

import csv
import json
import math
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from ctcbench import BackendUnavailable
from ctcbench.caselib.library import load_cases, select_cases
from ctcbench.cli import cli
from ctcbench.compare.checks import prepare
from ctcbench.compare.run import compare

from conftest import WRONG_BACKENDS_SOURCE, plugin_distribution


@pytest.fixture(scope="module")
def full_run(tmp_path_factory):
    """One run of the real CLI over every case and dtype for the numpy and torch backends
    (the third-party ones take minutes: CI runs them in its own `ctcbench compare` step)."""
    import torch
    torch.set_num_threads(1)
    out = tmp_path_factory.mktemp("full")
    backends = [a for b in ("numpy", "torch", "torch-cuda", "torch-cudnn") for a in ("--backend", b)]
    result = CliRunner().invoke(cli, ["compare", "--format", "json", "--out", str(out), *backends])
    return result, out


@pytest.mark.long
def test_whole_library_passes_for_every_available_backend(full_run):
    """CI regression: numpy and torch agree with every known answer; exit status 0."""
    result, _ = full_run
    assert result.exit_code == 0, result.output[-3000:]
    report = json.loads(result.stdout)
    rows = report["rows"]
    assert report["summary"]["failed"] is False
    assert not [r for r in rows if r["status"] in ("mismatch", "error")]
    cases = load_cases()
    refused = {(c.name, d) for c in cases for d in c.dtypes if "error" in c.expect}
    for backend in ("numpy", "torch"):
        ran = {(r["case"], r["dtype"]) for r in rows if r["backend"] == backend}
        assert ran == {(c.name, d) for c in cases for d in c.dtypes} - refused
    # a case the API must refuse is one row, backend "input-check", whatever backends were asked for
    assert {(r["case"], r["dtype"]) for r in rows if r["backend"] == "input-check"} == refused
    numpy_rows = [r for r in rows if r["backend"] == "numpy"]
    assert all(r["status"] == "ok" for r in numpy_rows)  # the reference takes every dtype


@pytest.mark.long
def test_unavailable_and_unsupported_are_recorded_not_failed(full_run):
    """No GPU: CUDA backends are one 'skipped' row each with the reason; torch float16 is 'unsupported'."""
    result, _ = full_run
    rows = json.loads(result.stdout)["rows"]
    import torch
    if not torch.cuda.is_available():
        skipped = [r for r in rows if r["backend"] == "torch-cuda"]
        assert len(skipped) == 1 and skipped[0]["status"] == "skipped"
        assert "CUDA" in skipped[0]["reason"]
    half = [r for r in rows if r["backend"] == "torch" and r["dtype"] == "float16"]
    assert half and all(r["status"] == "unsupported" for r in half)


@pytest.mark.long
def test_run_folder_has_rows_and_environment(full_run):
    """Results and an environment sidecar are written to the run folder."""
    _, out = full_run
    assert (out / "rows.jsonl").exists() and (out / "rows.csv").exists()
    assert (out / "margins.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    meta = json.loads((out / "meta.json").read_text())
    env = meta["environment"]
    for key in ("python", "cpu", "torch_threads", "git_commit", "utc_time", "packages"):
        assert key in env
    assert "torch" in meta["config"]["backend_versions"]["torch"]


@pytest.mark.long
def test_wrong_plugin_through_entry_point_fails_the_gate(tmp_path):
    """A plugin installed via entry point that merges repeats makes compare exit 1, naming
    exactly the cases whose targets have adjacent repeats."""
    plugin_distribution(tmp_path, "merges-repeats", "wrongctc", WRONG_BACKENDS_SOURCE,
                        "MergesRepeats")
    globs = ["tf_basic", "warpctc_small", "toy_alpha_beta", "*perfect_vs_blank",
             "single_alignment_*", "empty_target", "infeasible_target", "ragged_batch"]
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1"}
    base = [sys.executable, "-c", "from ctcbench.cli import main; main()", "compare",
            "--backend", "merges-repeats", "--dtype", "float64", "--no-plot"]
    for g in globs:
        base += ["--case", g]
    proc = subprocess.run(base + ["--format", "json", "--out", str(tmp_path / "run")], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 1, proc.stderr[-2000:]
    summary = json.loads(proc.stdout)["summary"]
    with_repeats = {c.name for c in select_cases(load_cases(), globs)
                    if any(p.repeats().any() for p in prepare(c, "float64").problems)}
    assert len(with_repeats) >= 5
    assert set(summary["failing_cases"]) == with_repeats
    table = subprocess.run(base, env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert table.returncode == 1
    lines = table.stdout.splitlines()
    assert lines[1].startswith("mismatch") and "FAILED" in lines[-1]  # failures first, verdict last
    assert all(name in lines[-1] for name in with_repeats)


class IgnoresBlank:
    """Wrong on purpose: always puts the blank at class 0."""

    def run(self, problem):
        from ctcbench import CTCProblem
        from ctcbench.backends.numpy_ref import NumpyBackend
        return NumpyBackend().run(CTCProblem(problem.logits, problem.targets, problem.input_lengths,
                                             problem.target_lengths, blank=0))


def test_wrong_backend_registered_in_process(register_backends, tmp_path):
    """register_backend(): a backend that ignores the blank index fails the cases with blank != 0."""
    register_backends("ignores-blank", IgnoresBlank)
    result = compare(["ignores-blank"], ["tf_basic", "blank_first_vs_last", "warpctc_small",
                                         "toy_alpha_beta"], ["float64"], out=tmp_path)
    df, summary = result.rows, result.summary
    assert summary["failed"]
    assert summary["failing_cases"] == ["blank_first_vs_last", "tf_basic"]
    assert set(df[df["status"] == "ok"]["case"]) == {"warpctc_small", "toy_alpha_beta"}


class NoWeights:
    """A correct backend whose run() takes no upstream weights."""

    def run(self, problem):
        from ctcbench.backends.numpy_ref import NumpyBackend
        return NumpyBackend().run(problem)


class Crashes:
    def run(self, problem):
        raise RuntimeError("kernel exploded")


def test_statuses_unsupported_and_error(register_backends, tmp_path):
    """A backend without grad_weights is 'unsupported' on that case; an exception is 'error'."""
    register_backends("no-weights", NoWeights)
    register_backends("crashes", Crashes)
    df = compare(["no-weights", "crashes"], ["upstream_gradient_scale", "toy_alpha_beta"],
                 ["float64"], out=tmp_path).rows
    status = {(r.backend, r.case): (r.status, r.reason) for r in df.itertuples()}
    assert status[("no-weights", "upstream_gradient_scale")][0] == "unsupported"
    assert "grad_weights" in status[("no-weights", "upstream_gradient_scale")][1]
    assert status[("no-weights", "toy_alpha_beta")][0] == "ok"
    assert status[("crashes", "toy_alpha_beta")] == ("error", "RuntimeError: kernel exploded")
    assert df["status"].iloc[0] == "error"  # failures first


def test_resume_keeps_finished_rows(tmp_path):
    """An interrupted run continues: rows already in the folder are kept, only the rest run."""
    runner = CliRunner()
    out = str(tmp_path / "run")
    args = ["compare", "--no-plot", "--backend", "numpy", "--out", out, "--format", "json"]
    first = runner.invoke(cli, [*args, "--case", "toy_alpha_beta"])
    assert first.exit_code == 0, first.output
    before = (tmp_path / "run" / "rows.jsonl").read_text().splitlines()
    second = runner.invoke(cli, [*args, "--case", "toy_alpha_beta", "--case", "warpctc_small",
                                 "--resume"])
    assert second.exit_code == 0, second.output
    after = (tmp_path / "run" / "rows.jsonl").read_text().splitlines()
    assert after[: len(before)] == before
    new = [json.loads(line) for line in after[len(before):]]
    assert {r["case"] for r in new} == {"warpctc_small"}
    cases = {r["case"] for r in json.loads(second.stdout)["rows"]}
    assert cases == {"toy_alpha_beta", "warpctc_small"}


def test_resume_alone_goes_on_with_the_runs_selection_and_meta_names_what_it_holds(tmp_path):
    """`--resume` with no --backend/--decoder/--case/--dtype checks what the run was started
    with (its decoders and their cases too), not every backend; one that adds a backend
    leaves a folder whose meta.json names both; a --function's run needs it again."""
    runner = CliRunner()
    out = tmp_path / "run"
    args = ["compare", "--no-plot", "--out", str(out), "--format", "json"]
    first = runner.invoke(cli, [*args, "--backend", "numpy", "--case", "toy_alpha_beta",
                                "--dtype", "float64"])
    assert first.exit_code == 0, first.output
    again = runner.invoke(cli, [*args, "--resume"])
    assert again.exit_code == 0, again.output
    rows = json.loads(again.stdout)["rows"]
    assert {(r["backend"], r["case"], r["dtype"]) for r in rows} == {
        ("numpy", "toy_alpha_beta", "float64")}
    more = runner.invoke(cli, [*args, "--resume", "--backend", "torch"])
    assert more.exit_code == 0, more.output
    assert {(r["backend"], r["case"], r["dtype"]) for r in json.loads(more.stdout)["rows"]} == {
        ("numpy", "toy_alpha_beta", "float64"), ("torch", "toy_alpha_beta", "float64")}
    config = json.loads((out / "meta.json").read_text())["config"]
    assert (config["backends"], config["cases"], config["dtypes"]) == (
        ["numpy", "torch"], ["toy_alpha_beta"], ["float64"])
    both = tmp_path / "both"  # a loss backend and a decoder, each on its own cases
    first = runner.invoke(cli, ["compare", "--backend", "numpy", "--decoder", "greedy", "--case",
                                "toy_alpha_beta", "--case", "decoders/repeats/*", "--dtype",
                                "float64", "--out", str(both), "--format", "json"])
    assert first.exit_code == 0, first.output
    log = both / "rows.jsonl"  # killed in the decoder stage: greedy's rows not written yet
    log.write_text("".join(line for line in log.read_text().splitlines(keepends=True)
                           if '"greedy"' not in line))
    alone = runner.invoke(cli, ["compare", "--out", str(both), "--resume", "--format", "json"])
    assert alone.exit_code == 0, alone.output
    def keys(res):
        return sorted((r["backend"], r["case"], r["dtype"], r["status"])
                      for r in json.loads(res.stdout)["rows"])
    assert keys(alone) == keys(first)  # greedy's rows again, none added
    function_run = tmp_path / "function"  # a --function's run: it must be given again
    (function_run).mkdir()
    (function_run / "meta.json").write_text(json.dumps(
        {"kind": "compare", "config": {"backends": ["mine:ctc_loss"], "cases": ["tf_basic"]}}))
    refused = runner.invoke(cli, ["compare", "--out", str(function_run), "--resume"])
    assert refused.exit_code != 0 and ("--resume: expected --function, --decoder or --aligner "
                                       f"given again: the run in {function_run} checked "
                                       "mine:ctc_loss, got none") in refused.output


def test_csv_and_table_formats(tmp_path):
    """--format csv gives one header and a row per (backend, case, dtype); table ends in a verdict."""
    runner = CliRunner()
    res = runner.invoke(cli, ["compare", "--no-plot", "--backend", "numpy", "--case",
                              "warpctc_small", "--dtype", "float32", "--dtype", "float64", "--format", "csv",
                              "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    lines = res.stdout.strip().splitlines()
    assert lines[0].startswith("status,backend,case,dtype,device") and len(lines) == 3
    res = runner.invoke(cli, ["compare", "--no-plot", "--backend", "numpy", "--case",
                              "warpctc_small", "--out", str(tmp_path / "b")])
    assert res.stdout.strip().splitlines()[-1].startswith("compare passed: 4 ok")


@pytest.mark.parametrize("args, message", [
    (["--backend", "nope"], "--backend: expected one of "),
    (["--case", "zzz*"], "case: expected a name or glob matching at least one case"),
    (["--cases", "/nonexistent/dir"], "cases: expected a folder"),
    (["--resume"], "--resume: expected --out DIR"),
    (["--dtype", "float8"], "--dtype: expected one of float16, bfloat16, float32, float64, "
                            "got 'float8' (did you mean 'float64'?)"),
])
def test_cli_errors_are_one_clean_line(tmp_path, args, message):
    """Bad options end with a click error naming the problem, never a traceback."""
    out = [] if "--resume" in args else ["--out", str(tmp_path / "x")]
    res = CliRunner().invoke(cli, ["compare", *out, *args])
    assert res.exit_code == (2 if "float8" in message else 1)  # a usage error, as click's
    assert message in res.output and "Traceback" not in res.output


def test_user_cases_folder(tmp_path):
    """--cases DIR runs the user's own cases (brute force oracle) and nothing else."""
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "mine.toml").write_text(textwrap.dedent("""
        [[case]]
        name = "my_case"
        description = "two samples, one with a repeat"
        provenance = "mine"
        [case.build]
        generator = "random"
        seed = 5
        C = 3
        [[case.build.sample]]
        target = [1, 1]
        T = 5
        [[case.build.sample]]
        target = [2]
        T = 2
        [case.expect]
        oracle = "brute_force"
        """))
    res = CliRunner().invoke(cli, ["compare", "--no-plot", "--backend", "numpy", "--backend",
                                   "torch", "--cases", str(folder), "--format", "json",
                                   "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["rows"]
    assert {(r["backend"], r["case"], r["status"]) for r in rows} == {
        ("numpy", "my_case", "ok"), ("torch", "my_case", "ok")}
    assert all(np.isfinite(r["loss"]) for r in rows)


def test_unbuildable_user_case_fails_before_running(tmp_path):
    """A user case its oracle cannot answer (brute force over 5**12 paths) is a clean CLI error
    naming the case and file, and no backend runs."""
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "big.toml").write_text(textwrap.dedent("""
        [[case]]
        name = "too_big"
        description = "too many paths to enumerate"
        provenance = "mine"
        [case.build]
        generator = "random"
        C = 5
        [[case.build.sample]]
        target = [1, 2]
        T = 12
        [case.expect]
        oracle = "brute_force"
        """))
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, ["compare", "--backend", "numpy", "--cases", str(folder),
                                   "--out", str(out)])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "big.toml: case 'too_big' (float32): logits: expected C**T <=" in res.output
    assert "C**T <=" in res.output and not out.exists()


def test_resume_after_an_infinite_loss(tmp_path):
    """Rows read back on --resume are numbers again: an infeasible target's inf loss formats
    as inf in the table, as in a fresh run."""
    out = str(tmp_path / "run")
    args = ["compare", "--no-plot", "--backend", "numpy", "--case", "infeasible_target",
            "--out", out]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(cli, [*args, "--resume"])
    assert again.exit_code == 0 and "Traceback" not in again.output, again.output
    head = again.stdout.splitlines()[0].split()
    shown = [dict(zip(head, line.split())) for line in again.stdout.splitlines()[1:-1]]
    fresh = [dict(zip(head, line.split())) for line in first.stdout.splitlines()[1:-1]]
    assert [{k: v for k, v in r.items() if k != "ms"} for r in shown] == \
        [{k: v for k, v in r.items() if k != "ms"} for r in fresh]
    df = compare(["numpy"], ["infeasible_target"], out=out, resume=True, progress=False).rows
    assert all(isinstance(x, float) and math.isinf(x) for x in df["loss"])  # T < L + repeats
    assert all(isinstance(x, float) for x in df["sample_loss"])


class Flaky:
    """Raises while ``broken`` is set (a transient failure), else the reference's answer."""

    broken = True

    def run(self, problem):
        from ctcbench.backends.numpy_ref import NumpyBackend
        if Flaky.broken:
            raise RuntimeError("device busy")
        return NumpyBackend().run(problem)


def test_resume_reruns_errors_and_keeps_the_rest(monkeypatch, register_backends, tmp_path):
    """--resume runs error rows again (they may be transient) but keeps a mismatch as it was."""
    monkeypatch.setattr(Flaky, "broken", True)
    register_backends("flaky", Flaky)
    register_backends("nan-grad", NanGradient)
    args = (["flaky", "nan-grad"], ["warpctc_small", "toy_alpha_beta"], ["float64"])
    first = compare(*args, out=tmp_path, progress=False).rows
    status = {(r.backend, r.case): r.status for r in first.itertuples()}
    assert status == {("flaky", "warpctc_small"): "error", ("flaky", "toy_alpha_beta"): "error",
                      ("nan-grad", "warpctc_small"): "mismatch",
                      ("nan-grad", "toy_alpha_beta"): "mismatch"}
    kept = [x for x in (tmp_path / "rows.jsonl").read_text().splitlines() if "nan-grad" in x]
    Flaky.broken = False
    second = compare(*args, out=tmp_path, resume=True, progress=False).rows
    log = (tmp_path / "rows.jsonl").read_text().splitlines()
    assert [x for x in log if "nan-grad" in x] == kept  # the mismatches, byte for byte
    assert {(r["backend"], r["case"], r["status"]) for r in map(json.loads, log)
            if r["backend"] == "flaky"} == {
        ("flaky", "warpctc_small", "ok"), ("flaky", "toy_alpha_beta", "ok")}  # errors replaced
    assert len(log) == 4  # one row per key
    status = {(r.backend, r.case): r.status for r in second.itertuples()}
    assert status == {("flaky", "warpctc_small"): "ok", ("flaky", "toy_alpha_beta"): "ok",
                      ("nan-grad", "warpctc_small"): "mismatch",
                      ("nan-grad", "toy_alpha_beta"): "mismatch"}


class Unavailable:
    def __init__(self):
        raise BackendUnavailable("no such device here")


@pytest.mark.parametrize("args", [
    ["--backend", "numpy", "--case", "uniform_long_t2000", "--dtype", "float16"],  # not its dtype
    ["--backend", "nowhere", "--case", "tf_basic"],  # the only backend cannot run here
    # the API's own refusals of bad input pass, but they check no backend
    ["--backend", "nowhere", "--case", "tf_basic", "--case", "tf_rank_too_small",
     "--case", "torch_ctc_loss_error_empty"],
])
def test_a_run_that_checks_nothing_fails(register_backends, tmp_path, args):
    """A gate must not pass on nothing: no row checked -> exit 1, a clear error, checked 0."""
    register_backends("nowhere", Unavailable)
    res = CliRunner().invoke(cli, ["compare", "--no-plot", "--out", str(tmp_path / "r"),
                                   "--format", "json", *args])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "Error: nothing was checked" in res.stderr
    summary = json.loads(res.stdout)["summary"]
    assert summary["checked"] == 0 and summary["failed"] is True


class NanGradient:
    """Right loss, NaN gradient everywhere."""

    def run(self, problem):
        from ctcbench.backends.numpy_ref import NumpyBackend
        result = NumpyBackend().run(problem)
        result.grad_logits = np.full_like(result.grad_logits, np.nan)
        return result


def test_nan_error_is_not_shown_as_not_applicable(register_backends, tmp_path):
    """A NaN gradient error reads nan in table, JSON and CSV; a gradient the oracle does not
    give (uniform) reads -, null, empty."""
    register_backends("nan-grad", NanGradient)
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "u.toml").write_text(textwrap.dedent("""
        [[case]]
        name = "small_uniform"
        description = "uniform logits: loss only, no oracle gradient"
        provenance = "closed form"
        dtypes = ["float64"]
        [case.build]
        generator = "uniform"
        C = 4
        [[case.build.sample]]
        target = [1, 1]
        T = 5
        [case.expect]
        oracle = "uniform"
        """))
    base = ["compare", "--no-plot", "--backend", "nan-grad", "--cases", str(folder)]
    runs = {fmt: CliRunner().invoke(cli, [*base, "--format", fmt, "--out", str(tmp_path / fmt)])
            for fmt in ("table", "json", "csv")}
    assert all(r.exit_code == 1 for r in runs.values())  # a NaN gradient is a mismatch
    head, row = (line.split() for line in runs["table"].stdout.splitlines()[:2])
    cells = dict(zip(head[:11], row[:11]))
    assert (cells["status"], cells["grad_err"], cells["ref_grad"]) == ("mismatch", "-", "nan")
    (got,) = json.loads(runs["json"].stdout)["rows"]
    assert got["grad_err"] is None and got["ref_grad_err"] == "nan"
    (got,) = csv.DictReader(runs["csv"].stdout.splitlines())
    assert got["grad_err"] == "" and got["ref_grad_err"] == "nan"


def test_out_under_a_file_is_a_clean_error(tmp_path):
    """--out below a file is one error line naming --out, not a NotADirectoryError traceback."""
    (tmp_path / "afile").write_text("")
    res = CliRunner().invoke(cli, ["compare", "--no-plot", "--backend", "numpy", "--case",
                                   "tf_basic", "--out", str(tmp_path / "afile" / "sub")])
    assert res.exit_code == 1 and "Traceback" not in res.output
    assert "Error: --out: expected a folder" in res.output


def test_a_loss_below_zero_fails_the_gate(register_backends, tmp_path):
    """A loss 1e-7 low passes float32's loss tolerance but is below 0 on optax's near-certain
    alignment (answer 4.53e-8): the row fails with the invariant as its reason."""
    register_backends("loss-below-zero", "wrong_backends:LossBelowZero")
    result = compare(["loss-below-zero"], ["optax_negative_loss_near_certain"], ["float32"],
                     out=tmp_path / "run")
    row = result.rows.iloc[0]
    assert result.summary["failed"] and row["status"] == "mismatch"
    assert row["reason"].startswith("invariant [base] loss below 0: got -5.46546e-08 for sample 0")
