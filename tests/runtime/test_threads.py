"""Thread counts: one parser, one message per bad value, wherever the count was written."""
from __future__ import annotations

import numpy as np
import pytest
from click.testing import CliRunner

from ctcbench import CTCProblem, get_backend
from ctcbench.cli import cli
from ctcbench.runtime.threads import (PER_CPU, THREADS_ENV, most_threads, requested,
                                      thread_count, thread_counts, use_threads, worker_env)
from ctcbench.runtime.worker import shutdown_workers

WORDS = f"an integer in [1, {most_threads()}] ({PER_CPU} per CPU here)"  # the bound, here

LIST = "a count >= 1 or a comma-separated list like 1,2"

# value given to thread_counts -> the counts it means (written out, not computed)
GOOD_LISTS = [(2, [2]), ("2", [2]), (" 3 ", [3]), ("1,2", [1, 2]), ("2, 1", [2, 1]),
              ("1,2,1", [1, 2]), ([1, 4], [1, 4]), ((4,), [4]), (np.int64(2), [2])]

# value -> the whole one-line message
BAD_LISTS = [
    ("0", f"threads: expected {LIST}, got '0'"),
    ("1,zero", f"threads: expected {LIST}, got '1,zero'"),
    ("", f"threads: expected {LIST}, got ''"),
    ("1,,2", f"threads: expected {LIST}, got '1,,2'"),
    (-1, f"threads: expected {LIST}, got -1"),
    (True, f"threads: expected {LIST}, got True"),
    (1.5, f"threads: expected {LIST}, got 1.5"),
    ([], f"threads: expected {LIST}, got []"),
    ([1, "x"], f"threads: expected {LIST}, got [1, 'x']"),
    (None, f"threads: expected {LIST}, got None"),
]

BAD_COUNTS = [
    (0, f"threads: expected {WORDS}, got 0"),
    ("zero", f"threads: expected {WORDS}, got 'zero'"),
    ("2.0", f"threads: expected {WORDS}, got '2.0'"),
    (2.0, f"threads: expected {WORDS}, got 2.0"),
    (False, f"threads: expected {WORDS}, got False"),
    (most_threads() + 1, f"threads: expected {WORDS}, got {most_threads() + 1}"),
]


@pytest.mark.parametrize("value, counts", GOOD_LISTS)
def test_counts_in_every_form_given(value, counts):
    """A count, a list or "1,2" gives the counts in the order given, each once."""
    assert thread_counts(value) == counts


@pytest.mark.parametrize("value, message", BAD_LISTS)
def test_a_bad_list_is_one_line_naming_the_value(value, message):
    """Each bad --threads value is one ValueError with the whole value in it."""
    with pytest.raises(ValueError) as info:
        thread_counts(value)
    assert str(info.value) == message


@pytest.mark.parametrize("value, message", BAD_COUNTS)
def test_a_bad_count_is_one_line_naming_the_value(value, message):
    """One count must be an integer >= 1 (a string of one is read)."""
    with pytest.raises(ValueError) as info:
        thread_count(value)
    assert str(info.value) == message


def test_the_cli_error_names_the_option(tmp_path):
    """`bench --threads 1,0` stops before timing anything, naming --threads."""
    result = CliRunner().invoke(cli, ["bench", "--threads", "1,0", "--out", str(tmp_path / "r")])
    assert result.exit_code == 1
    assert result.stderr.strip() == f"Error: --threads: expected {WORDS}, got 0"
    huge = CliRunner().invoke(cli, ["bench", "--threads", "99999", "--out", str(tmp_path / "h")])
    assert huge.exit_code == 1 and "got 99999" in huge.stderr and not (tmp_path / "h").exists()
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("raw, count", [(None, None), ("", None), ("  ", None), ("3", 3)])
def test_requested_reads_the_environment(raw, count):
    """CTCBENCH_THREADS unset or empty asks for nothing; otherwise its count."""
    env = {} if raw is None else {THREADS_ENV: raw}
    assert requested(env) == count


def test_a_bad_environment_value_names_the_variable():
    """CTCBENCH_THREADS=zero is an error naming the variable, not a late int() failure."""
    with pytest.raises(ValueError) as info:
        requested({THREADS_ENV: "zero"})
    assert str(info.value) == f"CTCBENCH_THREADS: expected {WORDS}, got 'zero'"


@pytest.mark.parametrize("command", [["backends"], ["compare", "--backend", "numpy",
                                                    "--case", "tf_basic"]])
@pytest.mark.parametrize("raw", ["abc", "-1", "1e9"])
def test_every_command_refuses_a_bad_environment_value_first(monkeypatch, tmp_path, command,
                                                             raw):
    """Whatever a command reads of it later (numba's rows, a worker, nothing at all), a junk
    CTCBENCH_THREADS is one line naming it before any work: no run folder is written."""
    monkeypatch.setenv(THREADS_ENV, raw)
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, [*command, *(["--out", str(out)] if len(command) > 1 else [])])
    assert res.exit_code == 1, res.output
    assert res.output == f"Error: {THREADS_ENV}: expected {WORDS}, got {raw!r}\n"
    assert not out.exists()


def test_use_threads_sets_the_variables_workers_read():
    """use_threads(n) sets CTCBENCH_THREADS and the OpenMP/BLAS variables; worker_env passes
    the count on to a worker's environment."""
    env = {}
    assert use_threads(3, env) == 3
    assert env == {THREADS_ENV: "3", "OMP_NUM_THREADS": "3", "OPENBLAS_NUM_THREADS": "3",
                   "MKL_NUM_THREADS": "3"}
    child = {THREADS_ENV: "2", "OMP_NUM_THREADS": "8"}
    assert worker_env(child) == 2
    assert child == {THREADS_ENV: "2", "OMP_NUM_THREADS": "2", "OPENBLAS_NUM_THREADS": "2",
                     "MKL_NUM_THREADS": "2"}
    assert worker_env({}) is None


def test_an_isolated_backend_refuses_a_bad_count_before_starting_a_worker(monkeypatch):
    """A worker is never started with a thread count nobody could read."""
    monkeypatch.setenv(THREADS_ENV, "-2")
    backend = get_backend("numpy", isolated=True)
    problem = CTCProblem(np.zeros((3, 1, 2)), [[1]], [3], [1])
    try:
        with pytest.raises(ValueError) as info:
            backend.run(problem)
        assert str(info.value) == f"CTCBENCH_THREADS: expected {WORDS}, got '-2'"
        assert backend.worker_pid is None
    finally:
        shutdown_workers()
