"""Resume is lossless: a grid killed while it writes a log line (at any byte) and resumed
with --resume ends with every (run, step) once, holding what an uninterrupted run gives.

The kill is made inside the process: a hook on ``RowLog.append`` writes the first bytes of
the chosen line, then raises ``Killed`` out of the grid. On disk that leaves what a SIGKILL
at that byte leaves (the torn line, the checkpoint of the eval before, no summary.json for
the run); only the run folder's lock is released on the way out, where a real kill leaves
it to be taken over. The uninterrupted grid is the oracle; CPU and wall times are the only
fields allowed to differ."""
import json
import os
import shutil

import pandas as pd
import pytest
import torch
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.files import to_json
from ctcbench.runs.store import RowLog

TINY = ["--train-size", "48", "--test-size", "8", "--min-len", "1", "--max-len", "3",
        "--steps", "6", "--eval-every", "2", "--batch-size", "4", "--channels", "4",
        "--hidden", "8", "--optimizer", "adam,rmsprop", "--warmup", "2", "--jobs", "1"]
RUNS = ("crnn-adam-lr0.001-s0", "crnn-rmsprop-lr0.001-s0")
TIMING = ("cpu_s", "wall_s")


class Killed(BaseException):
    """The process dies here (no handler catches a BaseException that is not an Exception)."""


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("cache")


def grid(out, cache, *more):
    return CliRunner().invoke(cli, ["convergence", *TINY, "--out", str(out),
                                    "--cache-dir", str(cache), *more], catch_exceptions=False)


def resume(out):
    return CliRunner().invoke(cli, ["convergence", "--out", str(out), "--resume", "--jobs", "1"],
                              catch_exceptions=False)  # in this process: its notes reach stderr


def state(out):
    """What a finished grid holds, timing left out: each run's curve rows in order, the
    summary rows in rows.jsonl by run (paths relative to the folder), and the (run, step)
    keys of curves.csv."""
    curves = {name: [{k: v for k, v in r.items() if k not in TIMING}
                     for r in RowLog(out / "runs" / name / "curve.jsonl").rows()]
              for name in RUNS}
    rows = [{k: (os.path.relpath(v, out) if k in ("run_dir", "checkpoint") else v)
             for k, v in r.items() if k not in TIMING} for r in RowLog(out / "rows.jsonl").rows()]
    table = pd.read_csv(out / "curves.csv")
    return curves, sorted(rows, key=lambda r: r["run"]), sorted(zip(table["run"], table["step"]))


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, cache):
    """The uninterrupted grid: (its folder, its state)."""
    out = tmp_path_factory.mktemp("oracle") / "grid"
    res = grid(out, cache)
    assert res.exit_code == 0, res.output
    return out, state(out)


def notes(res) -> list[str]:
    return [line for line in res.stderr.splitlines() if line.startswith("note:")]


def kill_at(monkeypatch, log: str, line: int, cut):
    """Make the ``line``-th append (0-based, over every file named ``log``) write only
    ``cut(n)`` of its n bytes, and the process die there."""
    real, seen = RowLog.append, []

    def append(self, row):
        if self.path.name == log:
            seen.append(row)
            if len(seen) == line + 1:
                data = (to_json(row) + "\n").encode()
                with self.path.open("ab") as f:
                    f.write(data[: cut(len(data))])
                raise Killed
        real(self, row)
    monkeypatch.setattr(RowLog, "append", append)


CUTS = {"one byte": lambda n: 1, "mid-line": lambda n: n // 2,
        "all but the newline": lambda n: n - 1, "right after the newline": lambda n: n}


def killed_grid(tmp_path, cache, monkeypatch, log, line, cut):
    out = tmp_path / "grid"
    kill_at(monkeypatch, log, line, CUTS[cut])
    with pytest.raises(Killed):
        grid(out, cache)
    monkeypatch.undo()
    return out


@pytest.mark.long
@pytest.mark.parametrize("cut", list(CUTS))
@pytest.mark.parametrize("line", [0, 1, 3])  # the first row (step 0), step 2, the last (step 6)
def test_a_curve_torn_at_any_byte_resumes_to_the_uninterrupted_grid(tmp_path, cache, oracle,
                                                                    monkeypatch, line, cut):
    """Killed while the first run appends curve row ``line``: the torn row is done again
    from the checkpoint before it, no row is lost or doubled."""
    out = killed_grid(tmp_path, cache, monkeypatch, "curve.jsonl", line, cut)
    assert not (out / "runs" / RUNS[0] / "summary.json").exists()
    res = resume(out)
    assert res.exit_code == 0, res.output
    assert state(out) == oracle[1]


@pytest.mark.long
@pytest.mark.parametrize("cut", ["one byte", "mid-line", "right after the newline"])
@pytest.mark.parametrize("line", [0, 1])
def test_a_torn_grid_row_resumes_to_the_uninterrupted_grid(tmp_path, cache, oracle,
                                                          monkeypatch, line, cut):
    """Killed while rows.jsonl gets the summary row of run ``line``: that run's folder is
    complete and is taken as it is; rows.jsonl ends with one row per run."""
    out = killed_grid(tmp_path, cache, monkeypatch, "rows.jsonl", line, cut)
    res = resume(out)
    assert res.exit_code == 0, res.output
    assert state(out) == oracle[1]


def test_a_second_run_torn_mid_curve_keeps_the_first(tmp_path, cache, oracle, monkeypatch):
    """Killed inside the second run's curve: the first run, finished, is kept (its folder
    untouched), the second resumes from its checkpoint."""
    out = tmp_path / "grid"
    kill_at(monkeypatch, "curve.jsonl", 4 + 2, CUTS["mid-line"])  # 4 rows a run: run 2's step 4
    with pytest.raises(Killed):
        grid(out, cache)
    monkeypatch.undo()
    first = (out / "runs" / RUNS[0] / "curve.jsonl").read_bytes()
    res = resume(out)
    assert res.exit_code == 0, res.output
    assert state(out) == oracle[1]
    assert (out / "runs" / RUNS[0] / "curve.jsonl").read_bytes() == first


def test_a_checkpoint_past_the_curve_restarts_the_run_from_step_0(tmp_path, cache, oracle,
                                                                  monkeypatch):
    """A checkpoint later than the curve's last complete row (here the finished run's, put
    over a run killed at step 2): the steps in between would be lost, so the run starts
    again from step 0, and says so."""
    out = killed_grid(tmp_path, cache, monkeypatch, "curve.jsonl", 1, "mid-line")
    shutil.copy(oracle[0] / "runs" / RUNS[0] / "checkpoint.pt", out / "runs" / RUNS[0])
    res = resume(out)
    assert res.exit_code == 0, res.output
    [note] = notes(res)
    assert note == (f"note: {out / 'runs' / RUNS[0] / 'checkpoint.pt'}: checkpoint at step 6 "
                    f"but the last complete row of curve.jsonl is step 0; restarted the run "
                    f"from step 0")
    assert state(out) == oracle[1]


def test_resuming_onto_a_damaged_checkpoint_says_what_it_did(tmp_path, cache, oracle,
                                                              monkeypatch):
    """An unreadable checkpoint.pt: one note line on stderr naming it, and the run done
    again from step 0 to the uninterrupted grid's rows."""
    out = killed_grid(tmp_path, cache, monkeypatch, "curve.jsonl", 2, "mid-line")
    ckpt = out / "runs" / RUNS[0] / "checkpoint.pt"
    ckpt.write_bytes(ckpt.read_bytes()[:100])  # cut short by a disk, not by the run
    res = resume(out)
    assert res.exit_code == 0, res.output
    [note] = notes(res)
    assert note.startswith(f"note: checkpoint: expected a checkpoint.pt written by `ctcbench "
                           f"convergence`, got {str(ckpt)!r}")
    assert note.endswith("; restarted the run from step 0")
    assert state(out) == oracle[1]


def test_a_damaged_summary_is_made_again(tmp_path, cache, oracle, monkeypatch):
    """A finished run whose summary.json is unreadable: its end is done again from its last
    checkpoint (a note says so), giving the same summary row."""
    out = killed_grid(tmp_path, cache, monkeypatch, "rows.jsonl", 0, "one byte")
    summary = out / "runs" / RUNS[0] / "summary.json"
    summary.write_text(summary.read_text()[:20])
    res = resume(out)
    assert res.exit_code == 0, res.output
    assert f"note: {summary}: unreadable" in res.stderr
    assert state(out) == oracle[1]
    assert json.loads(summary.read_text())["steps"] == 6
