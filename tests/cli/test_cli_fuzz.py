"""`ctcbench fuzz` through the real CLI: a clean run, a plugin found through its entry point and
replayed on --resume, bad options."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from conftest import WRONG_BACKENDS_SOURCE, plugin_distribution


def test_numpy_fuzzes_clean(tmp_path):
    """The reference against itself: its gradients keep every invariant at every drawn scale and
    length, so nothing is found: exit 0, the number of problems tried printed."""
    result = CliRunner().invoke(cli, ["fuzz", "--backend", "numpy", "--against", "numpy",
                                      "--budget", "3", "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "nothing found" in result.output
    [head] = [line for line in result.stdout.splitlines() if line.startswith("fuzz numpy")]
    tried = int(head.split(":")[1].split()[0])  # "fuzz numpy against numpy: N problems in S s"
    assert tried > 0


@pytest.mark.long
def test_cli_through_entry_point_replays_failures_first(tmp_path):
    """A plugin installed through the entry point: exit 1 with the case file named; a rerun on the
    same folder replays the stored failure first, so it finds it again after fewer problems."""
    plugin_distribution(tmp_path, "wrong-lengths", "wrongfuzz", WRONG_BACKENDS_SOURCE,
                        "IgnoresInputLengths")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", "from ctcbench.cli import main; main()", "fuzz",
           "--backend", "wrong-lengths", "--budget", "30", "--seed", "3", "--format", "json",
           "--out", str(tmp_path / "run")]
    first = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 1, first.stderr[-2000:]
    found = json.loads(first.stdout)
    assert found["found"] and os.path.exists(found["case_file"])
    refused = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert refused.returncode != 0 and "--resume" in refused.stderr  # never mixed into silently
    again = subprocess.run(cmd + ["--resume"], env=env, capture_output=True, text=True, timeout=300)
    assert again.returncode == 1
    replay = json.loads(again.stdout)
    assert replay["size"] == found["size"] and replay["tried"] <= found["tried"]


@pytest.mark.parametrize("args, names", [
    (["--backend", "numpy", "--budget", "0"], "--budget"),
    (["--backend", "numpy", "--seed", "-1"], "--seed"),
    (["--backend", "no-such-backend"], "no-such-backend"),
    (["--backend", "numpy", "--dtype", "float8"], "--dtype"),
    (["--backend", "torch", "--dtype", "float16"],
     "--dtype: expected a dtype 'torch' computes in (float32, float64), got float16"),
])
def test_bad_options_are_one_clear_line(args, names, tmp_path):
    """Bad options name themselves; no traceback."""
    result = CliRunner().invoke(cli, ["fuzz", *args, "--out", str(tmp_path / "run")])
    assert result.exit_code != 0 and names in result.output
    assert "Traceback" not in result.output


@pytest.mark.long
def test_numba_fuzzes_clean_against_the_reference(tmp_path):
    """The compiled backend agrees with the float64 reference on everything drawn in a short budget."""
    pytest.importorskip("numba", reason="needs numba, a dependency of ctcbench: pip install numba")
    result = CliRunner().invoke(cli, ["fuzz", "--backend", "numba", "--budget", "5",
                                      "--out", str(tmp_path / "run")])
    assert result.exit_code == 0, result.output
    assert "nothing found" in result.output
