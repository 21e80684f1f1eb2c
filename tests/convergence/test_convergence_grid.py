"""The `ctcbench convergence` command: a grid of runs in worker processes, its files, its
tables, resume, and its errors, driven through the real CLI."""
import json

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.convergence.grid import optimizer_table

TINY = ["--train-size", "48", "--test-size", "8", "--min-len", "1", "--max-len", "3",
        "--steps", "3", "--eval-every", "2", "--batch-size", "4", "--channels", "4", "--hidden", "8"]


def _run(args):
    return CliRunner().invoke(cli, ["convergence", *TINY, *args], catch_exceptions=False)


@pytest.mark.long
def test_grid_in_parallel_workers_writes_everything(tmp_path):
    """Two optimizers x two seeds in two worker processes: one summary row per run, curves,
    optimizer table, verdicts, plot, checkpoints; --format json prints runs, verdicts and
    differences."""
    out = tmp_path / "grid"
    res = _run(["--optimizer", "adam,rmsprop", "--seed", "0,1", "--jobs", "2", "--out", str(out),
                "--cache-dir", str(tmp_path / "cache"), "--format", "json"])
    assert res.exit_code == 0, res.output
    printed = json.loads(res.stdout)
    rows = printed["runs"]
    assert sorted(v["optimizer"] for v in printed["verdicts"]) == ["adam", "rmsprop"]
    assert [(d["optimizer"], d["versus"]) for d in printed["differences"]] == [("adam", "rmsprop")]
    assert sorted((r["optimizer"], r["seed"]) for r in rows) == [
        ("adam", 0), ("adam", 1), ("rmsprop", 0), ("rmsprop", 1)]
    for r in rows:
        assert (out / "runs" / r["run"] / "checkpoint.pt").is_file()
        assert r["checkpoint"].endswith("checkpoint.pt") and r["run_dir"].startswith(str(out))
    for name in ("meta.json", "summary.csv", "curves.csv", "optimizers.csv", "verdicts.json",
                 "convergence.png"):
        assert (out / name).is_file(), name
    curves = pd.read_csv(out / "curves.csv")
    assert set(curves["step"]) == {0, 2, 3} and curves["run"].nunique() == 4
    meta = json.loads((out / "meta.json").read_text())
    assert meta["config"]["grid"]["optimizers"] == ["adam", "rmsprop"]
    assert "torch" in meta["environment"]["packages"]


def test_table_output_and_resume(tmp_path):
    """The table names the run folder; --resume of a finished folder reproduces its rows."""
    out = tmp_path / "one"
    res = _run(["--out", str(out), "--cache-dir", str(tmp_path / "cache")])
    assert res.exit_code == 0, res.output
    assert "final_cer" in res.output and f"run folder: {out}" in res.output
    first = pd.read_csv(out / "summary.csv")
    res = CliRunner().invoke(cli, ["convergence", "--out", str(out), "--resume", "--format", "json"])
    assert res.exit_code == 0, res.output
    again = json.loads(res.stdout)["runs"]
    assert [r["final_cer"] for r in again] == list(first["final_cer"])


@pytest.mark.parametrize("args,message", [
    (["--optimizer", "lbfgs"], "--optimizer: expected one of adam, rmsprop"),
    (["--lr", "fast"], "expected a comma-separated list of numbers, got 'fast'"),
    (["--model", "vgg"], "--model: expected one of linecnn"),
    (["--ctc-backend", "nope"], "--ctc-backend: expected one of "),
    pytest.param(["--ctc-backend", "torch-cuda"], "--ctc-backend: no CUDA device",
                 marks=pytest.mark.skipif(torch.cuda.is_available(), reason=(
                     "checks the error without a CUDA device: run with CUDA_VISIBLE_DEVICES=''"))),
    (["--min-len", "5", "--max-len", "2"], "--max-len: expected >= min_len (5), got 2"),
    (["--jobs", "0"], "--jobs: expected >= 1, got 0"),
    (["--beam", "-1"], "--beam: expected an integer in [0, 256] (0 = greedy only), got -1"),
    (["--channels", "0"],
     "--channels: expected an integer in [1, 256] (later blocks double it), got 0"),
    (["--hidden", "0"], "--hidden: expected an integer in [1, 1024], got 0"),
    (["--momentum", "-1"], "--momentum: expected a finite value >= 0, got -1.0"),
    (["--weight-decay", "-1"], "--weight-decay: expected a finite value >= 0, got -1.0"),
    (["--alpha", "2"], "--alpha: expected a value in [0, 1], got 2.0"),
    (["--seed", "0,0"], "expected distinct values, got '0,0'"),
    (["--lr", "1e-3,0.001"], "expected distinct values, got '1e-3,0.001'"),
    (["--lr", "0.001,0.0010000001"], "--lr: expected rates that differ in 6 significant digits"),
    # a 16-px window every 4 px over a 128-px line: (128 - 16) / 4 + 1 = 29 frames
    (["--model", "linecnn", "--min-len", "30", "--max-len", "30"], "--max-len: expected at most 29"),
    # a window wider than the line gives no frame: the window is named, not --max-len
    (["--model", "linecnnlstm", "--window", "1000"], "--window: expected at most data.width "
                                                     "(128): linecnnlstm slides windows"),
])
def test_bad_options_are_clean_errors(tmp_path, args, message):
    """Bad options end with one clear error line naming the option and a non-zero exit, no
    traceback, before the run folder is made."""
    res = _run([*args, "--out", str(tmp_path / "x"), "--cache-dir", str(tmp_path / "cache")])
    assert res.exit_code != 0
    assert message in res.output
    assert "Traceback" not in res.output
    assert not (tmp_path / "x").exists()


def test_resume_needs_a_run_folder(tmp_path):
    """--resume of a folder that holds no run is a clear error."""
    res = CliRunner().invoke(cli, ["convergence", "--out", str(tmp_path), "--resume"])
    assert res.exit_code != 0 and "resume: expected a convergence run folder" in res.output


@pytest.mark.parametrize("meta, message", [
    ('{"config": {"driver": "compare"}}',
     "holds a compare run; `ctcbench convergence` does not resume a compare run folder"),
    ('{"config": {"backends": ["numpy"]}}', "holds a run of unknown kind"),
    ("not json", "meta.json: expected the JSON a ctcbench run writes"),
    ("[]", "meta.json: expected a JSON object, got list"),
])
def test_resume_of_another_commands_folder_is_a_clear_error(tmp_path, meta, message):
    """--resume of a folder whose meta.json is not a convergence run's (another command's
    run, a damaged file) is one clear error line naming the folder."""
    (tmp_path / "meta.json").write_text(meta)
    res = CliRunner().invoke(cli, ["convergence", "--out", str(tmp_path), "--resume"])
    assert res.exit_code == 1
    [line] = res.output.strip().splitlines()
    assert line.startswith("Error: ") and str(tmp_path) in line and message in line


def test_optimizer_table_picks_best_lr_and_shows_spread():
    """Best lr = lowest median final CER over seeds; the spread and censored seeds are shown."""
    summary = pd.DataFrame([
        # adam: lr 1e-3 converges on one seed of two, lr 3e-3 on both
        dict(model="crnn", optimizer="adam", lr=1e-3, seed=0, final_cer=0.9, steps_to_cer10=None, plateau_end_step=None),
        dict(model="crnn", optimizer="adam", lr=1e-3, seed=1, final_cer=0.05, steps_to_cer10=400, plateau_end_step=300),
        dict(model="crnn", optimizer="adam", lr=3e-3, seed=0, final_cer=0.04, steps_to_cer10=300, plateau_end_step=200),
        dict(model="crnn", optimizer="adam", lr=3e-3, seed=1, final_cer=0.06, steps_to_cer10=350, plateau_end_step=250),
        dict(model="crnn", optimizer="rmsprop", lr=1e-3, seed=0, final_cer=0.9, steps_to_cer10=None, plateau_end_step=None),
        dict(model="crnn", optimizer="rmsprop", lr=1e-3, seed=1, final_cer=0.02, steps_to_cer10=500, plateau_end_step=450),
    ])
    t = optimizer_table(summary).set_index("optimizer")
    assert t.loc["adam", "best_lr"] == 3e-3
    assert t.loc["adam", "reached_cer10"] == "2/2"
    assert t.loc["adam", "steps_to_cer10_range"] == "300-350"
    assert t.loc["rmsprop", "reached_cer10"] == "1/2"
    assert t.loc["rmsprop", "steps_to_cer10_range"] == "500 (+1 never)"
    assert pd.isna(t.loc["rmsprop", "steps_to_cer10_median"])


@pytest.mark.long
def test_registry_ctc_backend_trains_like_torch(tmp_path):
    """`--ctc-backend numpy` trains through ctcbench.torch and gives torch's native curve to
    float32 precision (rel 1e-5), while the run records which backend it used."""
    curves = {}
    for name in ("torch", "numpy"):
        res = _run(["--ctc-backend", name, "--optimizer", "adam", "--jobs", "1",
                    "--out", str(tmp_path / name), "--cache-dir", str(tmp_path / "cache")])
        assert res.exit_code == 0, res.output
        assert set(pd.read_csv(tmp_path / name / "summary.csv")["ctc_backend"]) == {name}
        curves[name] = pd.read_csv(tmp_path / name / "curves.csv").sort_values("step")
    assert list(curves["torch"]["step"]) == list(curves["numpy"]["step"]) == [0, 2, 3]
    for key in ("train_loss", "test_loss", "grad_norm"):
        want, got = curves["torch"][key].to_numpy(), curves["numpy"][key].to_numpy()
        assert got == pytest.approx(want, rel=1e-5, nan_ok=True), key


def test_unknown_ctc_backend_fails_before_rendering_data(tmp_path):
    """An unknown --ctc-backend names the option and fails before any data is rendered."""
    res = _run(["--ctc-backend", "nope", "--out", str(tmp_path / "x"),
                "--cache-dir", str(tmp_path / "cache")])
    assert res.exit_code != 0 and "--ctc-backend: expected one of " in res.output
    assert not (tmp_path / "cache").exists()


def test_a_diverged_run_is_reported_not_a_crash(tmp_path):
    """SGD at lr 1e30 overflows to NaN loss; the grid still finishes and records the NaN."""
    out = tmp_path / "nan"
    res = _run(["--optimizer", "sgd", "--lr", "1e30", "--out", str(out),
                "--cache-dir", str(tmp_path / "cache")])
    assert res.exit_code == 0, res.output
    curves = pd.read_csv(out / "curves.csv")
    assert curves["test_loss"].isna().iloc[-1]
    assert (out / "convergence.png").is_file()
