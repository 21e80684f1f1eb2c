"""Run folders: the lock, the torn row log, refusing folders of a run or of another kind, and
every driver killed with SIGKILL mid-run and resumed, through the real command line."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.bench.kind import KIND as BENCH
from ctcbench.compare.kind import KIND as COMPARE
from ctcbench.runs.store import RowLog, check_out, open_run

from conftest import plugin_distribution

CLI = [str(Path(sys.executable).with_name("ctcbench"))]  # the installed console script
SMALL = ["--backend", "numpy", "--backend", "torch", "--case", "alignment/*", "--case",
         "published/*", "--case", "blank_vs_perfect/*"]  # 13 cases, a few seconds
KINDS = ("compare", "bench", "convergence")
TINY_CONVERGENCE = ["--train-size", "48", "--test-size", "8", "--min-len", "1", "--max-len", "3",
                    "--eval-every", "2", "--batch-size", "4", "--channels", "4", "--hidden", "8",
                    "--jobs", "1"]


def start(*args, cwd=None, env=None) -> subprocess.Popen:
    """The real CLI in its own process group (so a kill reaches any worker it started)."""
    return subprocess.Popen([*CLI, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, start_new_session=True, cwd=cwd, env=env)


def run(*args, cwd=None, env=None, timeout=300) -> subprocess.CompletedProcess:
    """The real CLI in a process of its own, to the end."""
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=timeout, cwd=cwd,
                          env=env)


def invoke(*args):
    """The real CLI in this process (CliRunner): quick, for the checks that need no kill."""
    res = CliRunner().invoke(cli, list(args))
    res.returncode = res.exit_code
    return res


def wait_for(predicate, timeout=120.0, what="condition"):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return
        time.sleep(0.05)
    raise AssertionError(f"timed out waiting for {what}")


def lines(path: Path) -> list[str]:
    return path.read_text().splitlines() if path.exists() else []


def kill(proc: subprocess.Popen) -> None:
    os.killpg(proc.pid, signal.SIGKILL)
    proc.communicate(timeout=60)


def keys(path: Path, fields) -> list[tuple]:
    return [tuple(json.loads(line)[k] for k in fields) for line in lines(path)]


@pytest.fixture(scope="module")
def bench_grid(tmp_path_factory) -> Path:
    """Six small sizes, enough that a run can be killed between them."""
    path = tmp_path_factory.mktemp("grid") / "grid.json"
    path.write_text(json.dumps([{"T": 20 + 10 * i, "N": 2, "C": 5, "L": 4} for i in range(6)]))
    return path


# -- torn rows ---------------------------------------------------------------------------------
def test_repair_truncates_a_torn_last_line(tmp_path):
    """A last line without newline is cut off at the last good byte, never written onto."""
    log = RowLog(tmp_path / "rows.jsonl")
    good = '{"a": 1}\n{"a": 2}\n'
    log.path.write_text(good + '{"a": 3, "b"')
    notes = log.repair()
    assert len(notes) == 1 and "line 3" in notes[0] and "no newline" in notes[0]
    assert log.path.read_text() == good
    log.append({"a": 3})
    assert [r["a"] for r in log.rows()] == [1, 2, 3]


def test_repair_drops_an_undecodable_line_with_newline_and_one_inside(tmp_path):
    """A complete line that is not JSON (end or middle, e.g. a row written onto a torn one)
    is dropped; the good rows stay in order."""
    log = RowLog(tmp_path / "rows.jsonl")
    log.path.write_bytes(b'{"a": 1}\n{"a": 2, "b{"a": 9}\n{"a": 3}\n\xff\xfe\n')
    assert len(log.repair()) == 2
    assert log.path.read_text() == '{"a": 1}\n{"a": 3}\n'


def test_resume_drops_a_torn_row_with_a_note_and_reruns_it(tmp_path):
    """compare --resume on a log whose last row was cut: a note on stderr, the row runs again,
    one row per key at the end."""
    out = tmp_path / "run"
    args = ["compare", "--no-plot", "--backend", "numpy", "--case", "toy_alpha_beta",
            "--out", str(out)]
    assert invoke(*args).returncode == 0
    rows = out / "rows.jsonl"
    whole = lines(rows)
    rows.write_text("\n".join(whole[:-1]) + "\n" + whole[-1][:25])  # killed mid-write
    again = invoke(*args, "--resume")
    assert again.returncode == 0, again.stderr
    assert f"{rows} line {len(whole)}: dropped (no newline" in again.stderr
    assert sorted(keys(rows, ("case", "dtype"))) == sorted(set(keys(rows, ("case", "dtype"))))
    assert len(lines(rows)) == len(whole)


# -- refusing folders --------------------------------------------------------------------------
def test_an_existing_run_without_resume_is_refused_and_left_intact(tmp_path):
    """A second compare into a folder that holds a run, without --resume, exits 1 naming the
    folder; rows and meta are byte for byte as they were."""
    out = tmp_path / "run"
    args = ["compare", "--no-plot", "--backend", "numpy", "--case", "tf_basic", "--out", str(out)]
    assert invoke(*args).returncode == 0
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.name != "run.lock"}
    again = invoke(*args)
    assert again.returncode == 1
    assert (f"Error: --out: expected a new or empty folder, got {str(out)!r}, which already "
            f"holds a compare run; pass --resume") in again.stderr
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.name != "run.lock"} == before


@pytest.mark.parametrize("command", ["compare", "bench", "convergence"])
def test_resume_of_a_folder_that_does_not_exist_or_holds_no_run(tmp_path, command):
    """--resume of a missing folder, or of an empty one, is one clear error line."""
    missing = invoke(command, "--out", str(tmp_path / "nope"), "--resume")
    assert missing.returncode == 1 and "--resume: expected an existing run folder" in missing.stderr
    empty = invoke(command, "--out", str(tmp_path), "--resume")
    assert empty.returncode == 1
    assert f"--resume: expected a {command} run folder to continue" in empty.stderr


def _folder_of(kind: str, path: Path) -> Path:
    """A run folder as ``kind`` writes it: meta.json with its kind, one row."""
    path.mkdir()
    (path / "meta.json").write_text(json.dumps({"kind": kind, "row_format": 1, "config": {},
                                                "environment": {}}))
    (path / "rows.jsonl").write_text('{"backend": "numpy"}\n')
    return path


@pytest.mark.parametrize("kind, command", [(k, c) for k in KINDS for c in KINDS if k != c])
def test_a_folder_of_another_kind_is_refused_naming_both(tmp_path, kind, command):
    """Each command refuses to resume (or write into) each other command's run folder, in one
    line naming the folder, its kind and the command given; nothing in it changes."""
    folder = _folder_of(kind, tmp_path / "run")
    extra = {"compare": ["--case", "tf_basic", "--backend", "numpy"],
             "bench": ["--grid", "small", "--backend", "numpy"], "convergence": []}[command]
    for flags in (["--resume"], []):
        res = invoke(command, *extra, "--out", str(folder), *flags)
        assert res.returncode == 1, res.stderr
        [line] = res.stderr.strip().splitlines()
        assert f"got {str(folder)!r}, which holds a {kind} run; `ctcbench {command}`" in line
    assert lines(folder / "rows.jsonl") == ['{"backend": "numpy"}']


def test_an_unreadable_row_format_is_refused(tmp_path):
    """A folder written with a newer row format is refused naming the format."""
    folder = tmp_path / "run"
    folder.mkdir()
    (folder / "meta.json").write_text('{"kind": "bench", "row_format": 99, "config": {}}')
    with pytest.raises(ValueError, match=r"expected bench rows of format 1, the one this "
                                         r"ctcbench reads, got .*, which holds format 99 "
                                         r"\(the folder was written by a newer"):
        open_run(BENCH, folder, resume=True)


def test_a_legacy_compare_folder_is_told_from_its_meta(tmp_path):
    """A folder from before kinds were recorded ({"config": {"driver": "compare"}}) is a
    compare run: bench refuses it, compare resumes it."""
    folder = tmp_path / "old"
    folder.mkdir()
    (folder / "meta.json").write_text('{"config": {"driver": "compare"}, "environment": {}}')
    with pytest.raises(ValueError, match="holds a compare run"):
        open_run(BENCH, folder, resume=True)
    with open_run(COMPARE, folder, resume=True) as opened:
        assert opened.kind is COMPARE


# -- the lock ----------------------------------------------------------------------------------
@pytest.mark.long
def test_a_second_writer_is_refused_naming_the_holder(tmp_path):
    """While one compare writes a folder, a second one exits 1 naming the folder and the
    first one's pid; the first finishes with one row per key."""
    out = tmp_path / "run"
    first = start("compare", "--no-plot", *SMALL, "--case", "invariance/*", "--case", "uniform/*",
                  "--out", str(out), "--format", "json")
    try:
        wait_for(lambda: len(lines(out / "rows.jsonl")) >= 1, what="the first row")
        second = invoke("compare", "--no-plot", "--backend", "numpy", "--case", "tf_basic",
                        "--out", str(out), "--resume")
        assert first.poll() is None, "the first run ended before the second one started"
        assert second.returncode == 1
        assert (f"--out: expected a run folder no other process is writing, got {str(out)!r}, "
                f"which is in use by pid {first.pid} on host" in second.stderr)
        stdout, _ = first.communicate(timeout=600)
    finally:
        if first.poll() is None:
            kill(first)
    assert first.returncode == 0
    rows = json.loads(stdout)["rows"]
    got = keys(out / "rows.jsonl", ("backend", "case", "dtype", "device"))
    assert len(got) == len(set(got)) == len(rows)


def test_a_folder_in_use_is_refused_by_the_checks_before_any_work(tmp_path):
    """check_out, which drivers call before building cases, already refuses a folder whose
    lock another holder has (here another open file of this process, as flock sees it), and
    takes nothing: once the holder lets go, the folder opens."""
    with open_run(COMPARE, tmp_path / "run") as held:
        held.write_meta({"driver": "compare"})
        with pytest.raises(ValueError, match=r"^--out: expected a run folder no other process "
                                             r"is writing, got .*, which is in use by pid "
                                             rf"{os.getpid()} on host"):
            check_out(COMPARE, tmp_path / "run", resume=True)
    with open_run(COMPARE, tmp_path / "run", resume=True):
        pass


def test_the_lock_of_a_killed_process_is_taken_over(tmp_path):
    """A process that took the lock and was killed leaves its record; the next run takes the
    lock over and says whose it was."""
    out = tmp_path / "run"
    holder = subprocess.Popen(
        [sys.executable, "-c", "import sys, time; from ctcbench.runs.store import open_run; "
                               "from ctcbench.bench.kind import KIND; "
                               "open_run(KIND, sys.argv[1]); print('held', flush=True); "
                               "time.sleep(600)", str(out)],
        stdout=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(ValueError, match=f"is in use by pid {holder.pid} on host"):
            open_run(BENCH, out)
    finally:
        kill(holder)
    assert json.loads((out / "run.lock").read_text())["pid"] == holder.pid  # left behind
    res = invoke("bench", "--grid", "small", "--backend", "numpy", "--repeat", "1", "--out", str(out))
    assert res.returncode == 0, res.stderr
    assert f"took over the lock of pid {holder.pid} on host" in res.stderr
    assert not (out / "run.lock").exists()  # a clean end leaves nothing to take over


# -- killed mid-run and resumed ----------------------------------------------------------------
SLOW_NUMPY = """
import time
from ctcbench.backends.numpy_ref import NumpyBackend

class SlowNumpy(NumpyBackend):
    def run(self, problem, **kwargs):
        time.sleep(0.2)  # so that a kill after a few rows lands mid-run, however fast the machine
        return super().run(problem, **kwargs)
"""


@pytest.mark.long
def test_compare_killed_mid_run_resumes_to_one_row_per_key(tmp_path):
    """compare is SIGKILLed after a few rows; --resume ends with every row exactly once."""
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    plugin_distribution(plugin, "slow-numpy", "slownumpy", SLOW_NUMPY, "SlowNumpy")
    env = {**os.environ, "PYTHONPATH": str(plugin)}
    out = tmp_path / "run"
    args = ["compare", "--no-plot", *SMALL, "--backend", "slow-numpy", "--out", str(out)]
    proc = start(*args, env=env)
    wait_for(lambda: len(lines(out / "rows.jsonl")) >= 4, what="four rows")
    kill(proc)
    done = len(lines(out / "rows.jsonl"))
    again = run(*args, "--resume", "--format", "json", env=env, timeout=600)
    assert again.returncode == 0, again.stderr
    rows = json.loads(again.stdout)["rows"]
    got = keys(out / "rows.jsonl", ("backend", "case", "dtype", "device"))
    assert len(got) == len(set(got)) == len(rows) > done


@pytest.mark.long
def test_bench_killed_mid_run_resumes_to_one_row_per_key(tmp_path, bench_grid):
    """bench is SIGKILLed between sizes; --resume measures only the rest, one row per key."""
    out = tmp_path / "run"
    args = ["bench", "--grid", str(bench_grid), "--backend", "numpy", "--repeat", "3",
            "--out", str(out)]
    proc = start(*args)
    wait_for(lambda: len(lines(out / "rows.jsonl")) >= 2, what="the first size")
    kill(proc)
    done = {k for k in keys(out / "rows.jsonl", ("backend", "T"))}
    assert len(done) < 12, "the run finished before it was killed"
    again = run(*args, "--resume", "--format", "json")
    assert again.returncode == 0, again.stderr
    got = keys(out / "rows.jsonl", ("backend", "T"))
    assert len(got) == len(set(got)) == 12  # 6 sizes x (numpy, torch)
    assert {(r["backend"], r["T"]) for r in json.loads(again.stdout)} == set(got)


@pytest.mark.long
def test_convergence_killed_mid_run_resumes_to_one_row_per_run(tmp_path):
    """convergence is SIGKILLed inside its second training run; --resume keeps the first,
    finishes the second from its checkpoint: one summary row per run, one curve row per eval."""
    out = tmp_path / "run"
    args = [*TINY_CONVERGENCE, "--steps", "40", "--seed", "0,1", "--out", str(out),
            "--cache-dir", str(tmp_path / "cache")]
    proc = start("convergence", *args)
    second = out / "runs" / "crnn-rmsprop-lr0.001-s1" / "curve.jsonl"
    wait_for(lambda: len(lines(second)) >= 3, timeout=300, what="the second run's evals")
    kill(proc)
    assert len(lines(out / "rows.jsonl")) == 1
    again = run("convergence", "--out", str(out), "--resume", "--format", "json")
    assert again.returncode == 0, again.stderr
    names = [r["run"] for r in json.loads(again.stdout)["runs"]]
    assert names == ["crnn-rmsprop-lr0.001-s0", "crnn-rmsprop-lr0.001-s1"]
    assert sorted(r["run"] for r in map(json.loads, lines(out / "rows.jsonl"))) == names
    for name in names:
        steps = [json.loads(x)["step"] for x in lines(out / "runs" / name / "curve.jsonl")]
        assert steps == list(range(0, 41, 2))


def children(pid: int) -> list[int]:
    """Live processes whose parent is ``pid`` (read from /proc)."""
    out = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit() and alive(int(entry.name)):
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                out.append(int(entry.name))
    return out


def alive(pid: int) -> bool:
    """Running, not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(),
                    reason="needs /proc (Linux), where the workers' parents and states are read")
@pytest.mark.long
def test_killed_grid_leaves_no_worker_training(tmp_path):
    """Only the convergence process is SIGKILLed (as a scheduler or OOM killer would): its two
    worker processes notice and exit instead of training on into the run folder."""
    out = tmp_path / "run"
    args = [*TINY_CONVERGENCE[:-2], "--jobs", "2", "--steps", "2000", "--seed", "0,1",
            "--out", str(out), "--cache-dir", str(tmp_path / "cache")]
    proc = start("convergence", *args)
    try:
        runs = [out / "runs" / f"crnn-rmsprop-lr0.001-s{s}" / "curve.jsonl" for s in (0, 1)]
        wait_for(lambda: all(len(lines(r)) >= 2 for r in runs), timeout=300,
                 what="both runs' evals")
        workers = children(proc.pid)
        assert len(workers) >= 2
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate(timeout=60)
        wait_for(lambda: not any(alive(w) for w in workers), timeout=20,
                 what="the orphaned workers to exit")
    finally:
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


@pytest.mark.long
@pytest.mark.parametrize("umask", [0o022, 0o027])
def test_a_finished_run_folder_is_readable_as_the_umask_allows_and_holds_no_lock(tmp_path, umask):
    """Every file a run writes has the mode a plain ``open(..., "w")`` gets under the same
    umask (atomic writes go through mkstemp, whose own mode is 0600), and a clean end
    leaves no run.lock."""
    out = tmp_path / "run"
    code = ("import os, sys; os.umask(int(sys.argv[1], 8)); from ctcbench.cli import cli; "
            "open(sys.argv[2], 'w').close(); "
            "cli(['bench', '--grid', 'small', '--backend', 'numpy', '--repeat', '1', "
            "'--out', sys.argv[3]])")
    plain = tmp_path / "plain"
    res = subprocess.run([sys.executable, "-c", code, oct(umask)[2:], str(plain), str(out)],
                         capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    expected = plain.stat().st_mode & 0o777
    assert expected == 0o666 & ~umask
    modes = {p.name: p.stat().st_mode & 0o777 for p in out.rglob("*") if p.is_file()}
    assert {"meta.json", "rows.jsonl"} <= set(modes)
    assert modes == dict.fromkeys(modes, expected)
    assert not (out / "run.lock").exists()
