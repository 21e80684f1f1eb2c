"""ctcbench.progress: a bar on a terminal, plain lines without carriage returns elsewhere, and
every long command showing its progress that way."""
import io
import os
import re
import select
import time

import numpy as np
import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.progress import EVERY_ENV, Progress, interval, said_if_slow

LINE = re.compile(r"^(?P<desc>.+): (?P<n>\d+)/(?P<total>\d+) (?P<unit>\w+), \d+ s( \(.*\))?$")


def lines_of(text: str) -> list[re.Match]:
    return [m for m in map(LINE.match, text.splitlines()) if m]


def test_every_update_writes_a_line_when_the_interval_is_zero(monkeypatch):
    """With CTCBENCH_PROGRESS_EVERY=0 each update is one plain line, counting up, no '\\r'."""
    monkeypatch.setenv(EVERY_ENV, "0")
    out = io.StringIO()
    with Progress("work", total=3, unit="items", stream=out) as bar:
        for _ in range(3):
            bar.update()
    text = out.getvalue()
    assert "\r" not in text
    assert [(m["desc"], int(m["n"]), int(m["total"]), m["unit"]) for m in lines_of(text)] == [
        ("work", 1, 3, "items"), ("work", 2, 3, "items"), ("work", 3, 3, "items")]


def test_quick_work_stays_quiet_in_logs(monkeypatch):
    """At the default interval, work done within a second writes nothing to a log."""
    monkeypatch.delenv(EVERY_ENV, raising=False)
    out = io.StringIO()
    with Progress("work", total=50, stream=out) as bar:
        for _ in range(50):
            bar.update()
    assert out.getvalue() == ""


def test_a_slow_item_still_gets_lines_from_the_timer(monkeypatch):
    """No update for a while (one slow item) still writes lines, then a last one at the end."""
    monkeypatch.setenv(EVERY_ENV, "0.1")
    out = io.StringIO()
    with Progress("bench", total=2, unit="sizes", stream=out) as bar:
        bar.note("T=800 N=32")
        time.sleep(0.5)
        bar.update(2)
    found = lines_of(out.getvalue())
    assert len(found) >= 3 and found[0]["n"] == "0" and "(T=800 N=32)" in found[0].group(0)
    assert found[-1]["n"] == "2"


def test_a_pause_is_explained_while_it_lasts_and_a_quick_step_says_nothing():
    """said_if_slow: one line once the block has run ``after`` seconds, none for a block
    done sooner, and none after the block has ended."""
    out = io.StringIO()
    with said_if_slow("numba: compiling", after=0.1, stream=out):
        deadline = time.monotonic() + 10  # a loaded machine may run the timer late
        while not out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert out.getvalue() == "numba: compiling\n"  # said during the pause
        time.sleep(0.3)  # said once, not again
    quick = io.StringIO()
    with said_if_slow("numba: compiling", after=0.2, stream=quick):
        pass
    time.sleep(0.4)
    assert quick.getvalue() == "" and out.getvalue() == "numba: compiling\n"


def test_stage_counts_a_new_stage_from_zero(monkeypatch):
    """stage() renames the count and starts it again from zero with its own total."""
    monkeypatch.setenv(EVERY_ENV, "0")
    out = io.StringIO()
    with Progress("prep", total=1, unit="cases", stream=out) as bar:
        bar.update()
        bar.stage("run", total=2, unit="runs")
        bar.update()
    assert [m.group(0).split(",")[0] for m in lines_of(out.getvalue())] == [
        "prep: 1/1 cases", "run: 0/2 runs", "run: 1/2 runs"]


def test_a_stage_ends_on_its_last_count_in_a_log(monkeypatch):
    """Between the interval's lines, stage() first writes where the stage before ended, as
    close() does for the last stage."""
    monkeypatch.setenv(EVERY_ENV, "1000")  # the first line after a second, then none
    out = io.StringIO()
    with Progress("prep", total=3, unit="cases", stream=out) as bar:
        bar.update()
        deadline = time.monotonic() + 10
        while not out.getvalue() and time.monotonic() < deadline:
            time.sleep(0.05)
        bar.update(2)
        bar.stage("run", total=2, unit="runs")
        bar.update(2)
    assert [m.group(0).split(",")[0] for m in lines_of(out.getvalue())] == [
        "prep: 1/3 cases", "prep: 3/3 cases", "run: 2/2 runs"]


def test_disabled_writes_nothing(monkeypatch):
    """enabled=False shows nothing at all."""
    monkeypatch.setenv(EVERY_ENV, "0")
    out = io.StringIO()
    with Progress("work", total=2, stream=out, enabled=False) as bar:
        bar.update(2)
    assert out.getvalue() == ""


def test_a_terminal_gets_a_tqdm_bar(monkeypatch):
    """On a real terminal (a pseudo-terminal) the progress is a bar redrawn with '\\r'."""
    monkeypatch.setenv(EVERY_ENV, "0")
    master, slave = os.openpty()
    with os.fdopen(slave, "w") as tty:
        with Progress("work", total=2, unit="items", stream=tty) as bar:
            assert bar.mode == "bar"
            bar.update(2)
        tty.flush()
        shown = ""
        while select.select([master], [], [], 0.5)[0]:  # a pty hands the writes over in pieces
            shown += os.read(master, 4096).decode()
    os.close(master)
    assert "\r" in shown and "work" in shown and "2/2" in shown


@pytest.mark.parametrize("value", ["-1", "soon", "nan"])
def test_a_bad_interval_names_the_variable(monkeypatch, value):
    """A negative or non-numeric CTCBENCH_PROGRESS_EVERY is an error naming the variable."""
    monkeypatch.setenv(EVERY_ENV, value)
    with pytest.raises(ValueError, match=f"{EVERY_ENV}: expected a number of seconds >= 0"):
        interval()


# -- the commands ---------------------------------------------------------------------------
def run_cli(monkeypatch, *args):
    monkeypatch.setenv(EVERY_ENV, "0")
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    assert "\r" not in result.stderr
    return result


def test_compare_shows_progress_from_preparing_on(monkeypatch, tmp_path):
    """compare with stderr not a terminal: plain lines, the first while it prepares the cases."""
    result = run_cli(monkeypatch, "compare", "--backend", "numpy", "--case", "tf_basic",
                     "--case", "toy_alpha_beta", "--dtype", "float64", "--out", str(tmp_path),
                     "--no-plot")
    assert result.exit_code == 0, result.output
    found = lines_of(result.stderr)
    assert found[0]["desc"] == "compare (preparing cases)" and found[0]["total"] == "2"
    assert ("compare", "2", "2") in {(m["desc"], m["n"], m["total"]) for m in found}


def test_compare_of_decoders_ends_on_their_last_count(monkeypatch, tmp_path):
    """With lines every 0.05 s, the decoders' stage (after the losses') still has its timer,
    and the log ends on its last count, one skipped decoder's cases included."""
    from ctcbench.runtime.decoders import register_decoder, unregister_decoder
    monkeypatch.setenv(EVERY_ENV, "0.05")  # a line is due long before the work ends
    register_decoder("not-installed", "no_such_module_here:Decoder")  # a skipped row
    try:
        result = CliRunner().invoke(cli, [
            "compare", "--backend", "numpy", "--case", "tf_basic", "--dtype", "float64",
            "--decoder", "greedy", "--decoder", "beam", "--decoder", "not-installed",
            "--case", "decoders/repeats/*", "--out", str(tmp_path), "--no-plot"])
    finally:
        unregister_decoder("not-installed")
    assert result.exit_code == 0, result.output
    found = [m for m in lines_of(result.stderr) if m["desc"] == "compare decoders"]
    assert found and found[-1]["n"] == found[-1]["total"], result.stderr


def test_bench_shows_progress_lines(monkeypatch, tmp_path):
    """bench with stderr not a terminal: one plain line per size measured, no '\\r'."""
    grid = tmp_path / "sizes.csv"
    grid.write_text("T,N,C,L\n6,2,4,2\n8,2,4,3\n")
    result = run_cli(monkeypatch, "bench", "--grid", str(grid), "--backend", "numpy",
                     "--repeat", "1", "--out", str(tmp_path / "run"))
    assert result.exit_code == 0, result.output
    assert [(m["desc"], m["n"], m["total"]) for m in lines_of(result.stderr)][-2:] == [
        ("bench", "1", "2"), ("bench", "2", "2")]


def test_doctor_explain_shows_progress_lines(monkeypatch, tmp_path):
    """doctor --explain-perfect-vs-blank scores its scenarios with plain progress lines."""
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(12, 2, 5))
    log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    np.savez(tmp_path / "x.npz", log_probs=log_probs, targets=np.array([[1, 2], [3, 4]]),
             input_lengths=np.array([12, 12]), target_lengths=np.array([2, 2]))
    result = run_cli(monkeypatch, "doctor", str(tmp_path / "x.npz"), "--explain-perfect-vs-blank")
    assert result.exit_code == 0, result.output
    found = lines_of(result.stderr)
    assert found and found[-1]["desc"] == "scoring" and found[-1]["n"] == found[-1]["total"]


def test_convergence_shows_grid_progress_lines(monkeypatch, tmp_path):
    """convergence with stderr not a terminal: data rendering and grid steps as plain lines."""
    result = run_cli(monkeypatch, "convergence", "--train-size", "16", "--test-size", "4",
                     "--min-len", "1", "--max-len", "2", "--steps", "2", "--eval-every", "2",
                     "--batch-size", "2", "--channels", "4", "--hidden", "4",
                     "--out", str(tmp_path / "run"), "--cache-dir", str(tmp_path / "cache"))
    assert result.exit_code == 0, result.output
    found = {(m["desc"], m["n"], m["total"]) for m in lines_of(result.stderr)}
    assert ("render lines/train", "16", "16") in found
    assert ("convergence (1 runs)", "2", "2") in found
