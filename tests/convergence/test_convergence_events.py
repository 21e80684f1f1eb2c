"""`ctcbench convergence --tensorboard`: event files read back with TensorBoard's own reader
hold each run's curve rows and its config as hparams."""
import json
import math
import sys

import numpy as np
import pytest
from click.testing import CliRunner

from ctcbench.cli import cli

pytest.importorskip("tensorboard", reason="needs the [tensorboard] extra: pip install -e '.[tensorboard]'")
from tensorboard.backend.event_processing.event_accumulator import EventAccumulator  # noqa: E402
from tensorboard.plugins.hparams import plugin_data_pb2  # noqa: E402

TINY = ["--train-size", "32", "--test-size", "8", "--min-len", "1", "--max-len", "3",
        "--steps", "4", "--eval-every", "2", "--batch-size", "4", "--channels", "4", "--hidden", "8"]
# curve.jsonl field -> the tag it is shown under
TAGS = {"train_loss": "loss/train", "test_loss": "loss/test", "cer": "eval/cer",
        "blank_frac": "eval/blank_frac", "grad_norm": "optim/grad_norm", "lr": "optim/lr"}


def _run(tmp_path, *args):
    return CliRunner().invoke(cli, ["convergence", *TINY, "--cache-dir", str(tmp_path / "cache"),
                                    *args], catch_exceptions=False)


def _same(stored: float, logged) -> bool:
    """A value TensorBoard stored against the curve value it was made from (kept as float32)."""
    if logged == "nan":
        return math.isnan(stored)
    return stored == float(np.float32(logged))


def test_event_files_hold_the_curve_rows_and_the_hparams(tmp_path):
    """Default DIR: one subfolder per run; every scalar series equals that run's curve.jsonl
    rows step by step, and the run's config is there as hparams."""
    out = tmp_path / "run"
    res = _run(tmp_path, "--optimizer", "adam,rmsprop", "--jobs", "1", "--out", str(out),
               "--tensorboard")
    assert res.exit_code == 0, res.output
    runs = sorted(p.name for p in (out / "runs").iterdir())
    assert sorted(p.name for p in (out / "tensorboard").iterdir()) == runs
    for name in runs:
        rows = [json.loads(line) for line in (out / "runs" / name / "curve.jsonl").open()]
        config = json.loads((out / "runs" / name / "config.json").read_text())
        events = EventAccumulator(str(out / "tensorboard" / name))
        events.Reload()
        for field, tag in TAGS.items():
            logged = [(r["step"], r[field]) for r in rows if r[field] is not None]
            got = [(e.step, e.value) for e in events.Scalars(tag)]
            assert [s for s, _ in got] == [s for s, _ in logged], (name, tag)
            assert all(_same(v, want) for (_, v), (_, want) in zip(got, logged)), (name, tag)
        content = events.PluginTagToContent("hparams")["_hparams_/session_start_info"]
        hparams = plugin_data_pb2.HParamsPluginData.FromString(content).session_start_info.hparams
        assert hparams["optimizer"].string_value == config["optimizer"]
        assert hparams["lr"].number_value == config["lr"]
        assert hparams["steps"].number_value == 4
        assert hparams["model.name"].string_value == "crnn"
        assert hparams["data.max_len"].number_value == 3


def test_an_explicit_folder_and_a_rewrite_replace_the_events(tmp_path):
    """--tensorboard DIR writes there; resuming the finished folder rewrites, never duplicates."""
    out, board = tmp_path / "run", tmp_path / "board"
    assert _run(tmp_path, "--out", str(out), "--tensorboard", str(board)).exit_code == 0
    res = CliRunner().invoke(cli, ["convergence", "--out", str(out), "--resume", "--tensorboard", str(board)])
    assert res.exit_code == 0, res.output
    (run,) = board.iterdir()
    assert len(list(run.glob("events.out.tfevents.*"))) == 1
    events = EventAccumulator(str(run))
    events.Reload()
    assert [e.step for e in events.Scalars("eval/cer")] == [0, 2, 4]
    assert not (out / "tensorboard").exists()


def test_without_tensorboard_installed_it_is_one_clear_error(tmp_path, monkeypatch):
    """With the tensorboard package not importable, --tensorboard is one error line naming the
    option and the install command, before any run folder is made."""
    for name in [m for m in sys.modules if m == "tensorboard" or m.startswith("tensorboard.")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "tensorboard", None)  # what `import` finds when absent
    res = _run(tmp_path, "--out", str(tmp_path / "x"), "--tensorboard")
    assert res.exit_code == 1
    assert res.output.strip().splitlines() == [
        "Error: --tensorboard: expected the tensorboard package, got none installed (install "
        "it with: pip install 'ctcbench[tensorboard]')"]
    assert not (tmp_path / "x").exists()


def test_a_file_in_the_way_is_an_error_before_training(tmp_path):
    """--tensorboard naming an existing file is a usage error naming the option, before training."""
    (tmp_path / "board").write_text("")
    res = _run(tmp_path, "--out", str(tmp_path / "x"), "--tensorboard", str(tmp_path / "board"))
    assert res.exit_code == 2 and "--tensorboard:" in res.output and "expected a folder" in res.output and "(a file)" in res.output
    assert not (tmp_path / "x").exists()
