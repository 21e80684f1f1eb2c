"""`ctcbench datasheet` through the real CLI: the table, JSON, the page, resume after a torn
log, and bad options as one line."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.runtime.malformed import PROBES

pytestmark = pytest.mark.usefixtures("one_thread")


def test_datasheet_json_and_table(tmp_path):
    """numpy's malformed-input probes and repeat calls: JSON holds its sheet, the table one
    row per property, the folder its page, exports and rows."""
    runner = CliRunner()
    res = runner.invoke(cli, ["datasheet", "--backend", "numpy", "--stages",
                              "robustness,determinism", "--format", "json",
                              "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    sheet = json.loads(res.stdout)["backends"]["numpy"]
    assert [r["item"] for r in sheet["robustness"]] == [p.name for p in PROBES]
    assert sheet["determinism"]["float32"]["status"] == "identical"
    for name in ("report.html", "datasheet.json", "datasheet.md", "rows.jsonl", "meta.json",
                 "pages/numpy.html"):
        assert (tmp_path / "a" / name).is_file(), name
    res = runner.invoke(cli, ["datasheet", "--backend", "numpy", "--stages", "determinism",
                              "--out", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    *lines, measured_on = res.stdout.splitlines()  # the table, then the CPU
    assert measured_on.startswith("Measured on ") and measured_on.endswith(" CPUs)")
    assert lines[0].split() == ["numpy"] and lines[-1].split()[:3] == ["repeat", "calls", "(float32)"]
    # said before it starts: no search asked for, so no share of --budget
    assert ("datasheet: 1 backend x (0 s of searches (--budget) + about 2 s of the other "
            "stages): about 0.0 min in all") in res.stderr.splitlines()[0]
    assert "identical (5 calls)" in lines[-1]


@pytest.mark.long
def test_resume_after_a_torn_log_keeps_each_probe_once(register_backends, tmp_path):
    """Cut rows.jsonl inside its last line: --resume drops it, runs only what is missing, and
    the verdict is the uninterrupted run's, every key once."""
    register_backends("crash-past-T700", "cliff_backends:CrashPastT700")
    args = ["datasheet", "--backend", "crash-past-T700", "--stages", "limits", "--axes", "T",
            "--timeout", "5", "--out", str(tmp_path / "run")]
    runner = CliRunner()
    assert runner.invoke(cli, args).exit_code == 0
    log = tmp_path / "run" / "rows.jsonl"
    whole = [json.loads(line) for line in log.read_text().splitlines()]
    data = log.read_bytes()
    cut = data.rstrip(b"\n").rfind(b"\n") + 1  # the last row (the verdict) ...
    cut = data.rfind(b"\n", 0, cut - 1) + 10  # ... gone, and the probe before it torn
    log.write_bytes(data[:cut])
    res = runner.invoke(cli, [*args, "--resume"])
    assert res.exit_code == 0, res.output
    again = [json.loads(line) for line in log.read_text().splitlines()]
    keys = [(r["backend"], r["dtype"], r["stage"], r["item"]) for r in again]
    assert len(keys) == len(set(keys)) == len(whole)
    verdict = next(r for r in again if r["stage"] == "limit")
    assert (verdict["correct"], verdict["failing"], verdict["past_status"]) == (700, 701, "crashes")


@pytest.mark.long
def test_a_torn_precision_search_resumes_without_running_a_trial_twice(tmp_path):
    """Cut rows.jsonl inside a trial, the verdict gone: --resume replays the trials kept,
    runs the rest, and ends with each trial once and the uninterrupted run's worst cases."""
    args = ["datasheet", "--backend", "numba", "--stages", "precision", "--dtype", "float32",
            "--trials", "10", "--format", "json", "--out", str(tmp_path / "run")]
    runner = CliRunner()
    res = runner.invoke(cli, args)
    assert res.exit_code == 0, res.output
    whole = json.loads(res.stdout)["backends"]["numba"]["precision"]["float32"]
    log = tmp_path / "run" / "rows.jsonl"
    lines = log.read_bytes().splitlines(keepends=True)
    assert json.loads(lines[-1])["stage"] == "precision"
    log.write_bytes(b"".join(lines[:-4]) + lines[-4][:20])  # 3 trials and the verdict gone
    res = runner.invoke(cli, [*args, "--resume"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in log.read_text().splitlines()]
    keys = [(r["backend"], r["dtype"], r["stage"], r["item"]) for r in rows]
    assert len(keys) == len(set(keys)) == len(lines)
    again = json.loads(res.stdout)["backends"]["numba"]["precision"]["float32"]
    assert again["tried"] == whole["tried"] == 10
    assert all(again[k]["genes"] == whole[k]["genes"] for k in ("loss", "loss_rel", "grad"))


BAD = [  # (args, fragments of the one Error line)
    (["--backend", "nope"], ["--backend: expected one of", "got 'nope'"]),
    ([], ["--backend: expected a backend name (or --all)"]),
    (["--all", "--backend", "numpy"], ["--all: expected no --backend beside it"]),
    (["--backend", "numpy", "--stages", "limits,speling"], ["--stages: expected some of", "speling"]),
    (["--backend", "numpy", "--axes", "Q"], ["--axes: expected some of T, L, C, N, label, TL", "Q"]),
    (["--backend", "numpy", "--dtype", "float8"], ["--dtype: expected some of", "float8"]),
    (["--backend", "numpy", "--timeout", "0"], ["--timeout"]),
    (["--backend", "numpy", "--trials", "0"], ["--trials"]),
    (["--backend", "numpy", "--resume"], ["--resume: expected --out DIR"]),
    (["--backend", "needs-missing"], ["--backend: expected a backend that runs here"]),
]


@pytest.mark.parametrize("args,fragments", BAD, ids=[" ".join(a) or "nothing" for a, _ in BAD])
def test_bad_options_are_one_line(args, fragments, register_backends, tmp_path, monkeypatch):
    """Each bad command line: exit code 1 or 2 (click's own), one Error line naming the
    option, no traceback, no run folder."""
    register_backends("needs-missing", "misbehaving_backends:NeedsMissingPackage")
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(cli, ["datasheet", *args])
    assert res.exit_code in (1, 2) and "Traceback" not in res.output, res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith("Error: ") and all(f in last for f in fragments), res.output
    assert not (tmp_path / "reports").exists()


def test_resume_with_other_options_is_refused(tmp_path):
    """The probes a folder holds were run with its options: --resume with another --seed is
    one line naming the option and both values, and the folder is left as it was."""
    runner = CliRunner()
    args = ["datasheet", "--backend", "numpy", "--stages", "determinism", "--out",
            str(tmp_path / "run")]
    assert runner.invoke(cli, args).exit_code == 0
    before = (tmp_path / "run" / "rows.jsonl").read_bytes()
    res = runner.invoke(cli, [*args, "--resume", "--seed", "3"])
    assert res.exit_code == 1 and "Traceback" not in res.output
    last = res.output.strip().splitlines()[-1]
    assert last.startswith("Error: --resume: expected the options of the run") and "seed" in last
    assert (tmp_path / "run" / "rows.jsonl").read_bytes() == before


def test_nan_on_a_repeat_call_differs_and_an_untaken_dtype_is_said(register_backends, tmp_path):
    """A second call that comes back NaN is "differs", never "identical"; asking only for a
    dtype the backend does not take is a skipped sheet that says which it takes."""
    register_backends("nan-second", "cliff_backends:NaNOnSecondCall")
    res = CliRunner().invoke(cli, ["datasheet", "--backend", "nan-second", "--stages",
                                   "determinism", "--format", "json", "--out", str(tmp_path / "a")])
    assert res.exit_code == 0, res.output
    row = json.loads(res.stdout)["backends"]["nan-second"]["determinism"]["float32"]
    assert row["status"] == "differs"
    res = CliRunner().invoke(cli, ["datasheet", "--backend", "torch", "--dtype", "float16",
                                   "--stages", "determinism", "--format", "json",
                                   "--out", str(tmp_path / "b")])
    assert res.exit_code == 0, res.output
    sheet = json.loads(res.stdout)["backends"]["torch"]
    assert sheet["status"] == "skipped" and "takes none of --dtype float16" in sheet["detail"]
    assert "float32, float64" in sheet["detail"]


def test_resume_may_add_a_stage(tmp_path):
    """Another stage on --resume is rows of its own: the first stage's rows are kept as they
    were and the new stage's are added."""
    runner = CliRunner()
    args = ["datasheet", "--backend", "numpy", "--out", str(tmp_path / "run")]
    assert runner.invoke(cli, [*args, "--stages", "determinism"]).exit_code == 0
    before = (tmp_path / "run" / "rows.jsonl").read_text().splitlines()
    res = runner.invoke(cli, [*args, "--stages", "determinism,robustness", "--resume",
                              "--format", "json"])
    assert res.exit_code == 0, res.output
    after = (tmp_path / "run" / "rows.jsonl").read_text().splitlines()
    assert after[:len(before)] == before
    assert len(json.loads(res.stdout)["backends"]["numpy"]["robustness"]) == len(PROBES)
