"""ctcbench.fuzz.campaign on a real Dask cluster (a LocalCluster of worker processes): a wrong
plugin is found by one search and written as one case, a clean backend gives one row per
search, a worker killed mid-run still ends the campaign with every search once."""
from __future__ import annotations

import importlib.util
import json
import os
import signal
import threading
import time

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.fuzz.run import fuzz
from ctcbench.runs.store import RowLog

pytestmark = pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                reason="needs the [dask] extra: pip install -e '.[dask]'")


@pytest.fixture(scope="module")
def cluster():
    """Two Dask worker processes with one thread each; tests/ is on their sys.path (spawned
    from this one), so they import tests/wrong_backends.py by name."""
    import distributed
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as c:
        yield c


@pytest.mark.long
def test_a_wrong_plugin_is_found_once_and_resumed(cluster, register_backends, tmp_path):
    """--scheduler, two searches: the first find is shrunk and written as the only case file,
    each search is one row on its own seed; --resume adds one row per search again and finds
    it again from the shared database."""
    register_backends("wrong-repeats", "wrong_backends:MergesRepeats")
    out = tmp_path / "run"
    args = ["fuzz", "--backend", "wrong-repeats", "--budget", "4", "--seed", "3",
            "--scheduler", cluster.scheduler_address, "--out", str(out), "--format", "json"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == 1, res.output
    found = json.loads(res.stdout)
    assert found["found"] and found["workers"] == 2 and found["size"]["L"] <= 2
    assert [p.name for p in (out / "cases").iterdir()] == ["fuzz_wrong_repeats.toml"]
    assert found["case_file"] == str(out / "cases" / "fuzz_wrong_repeats.toml")
    rows = RowLog(out / "rows.jsonl").rows()
    assert sorted(r["search"] for r in rows) == [1, 2]
    assert sorted((r["worker"], r["seed"]) for r in rows) == [(0, 3000), (1, 3001)]
    assert sum(bool(r["found"]) for r in rows) == 1
    again = CliRunner().invoke(cli, [*args, "--resume"])
    assert again.exit_code == 1, again.output
    assert json.loads(again.stdout)["found"]
    rows = RowLog(out / "rows.jsonl").rows()
    assert sorted(r["search"] for r in rows) == [1, 2, 3, 4]
    assert list((out / "cases").iterdir()) == [out / "cases" / "fuzz_wrong_repeats.toml"]


@pytest.mark.long
def test_a_clean_backend_gives_one_row_per_search(tmp_path):
    """--executor dask-local --jobs 2: nothing found, two rows, both searches tried problems."""
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, ["fuzz", "--backend", "numpy", "--against", "numpy",
                                   "--budget", "2", "--executor", "dask-local", "--jobs", "2",
                                   "--out", str(out), "--format", "json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    assert not summary["found"] and summary["workers"] == 2
    rows = RowLog(out / "rows.jsonl").rows()
    assert len(rows) == 2 and all(r["tried"] > 0 and not r["found"] for r in rows)
    assert summary["tried"] == sum(r["tried"] for r in rows)


@pytest.mark.long
def test_a_killed_worker_still_ends_the_campaign(cluster, tmp_path):
    """One worker process killed mid-search: Dask runs its search again for what is left of
    the budget, and the campaign ends with one row per search, nothing written twice."""
    import distributed
    client = distributed.Client(cluster)
    done = {}

    def campaign():
        done["result"] = fuzz("numpy", against="numpy", budget=6, seed=1, out=tmp_path / "run",
                              scheduler=cluster.scheduler_address, jobs=2, progress=False)

    thread = threading.Thread(target=campaign)
    thread.start()
    attempts = tmp_path / "run" / "campaigns"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:  # both searches past their warm-up
        if attempts.is_dir() and len(list(attempts.glob("*.jsonl"))) == 2:
            break
        time.sleep(0.05)
    time.sleep(1.0)
    busy = [addr for addr, keys in client.processing().items() if keys]
    assert busy, client.processing()
    pid = client.run(os.getpid, workers=busy[:1])[busy[0]]
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout=120)
    client.close()
    assert not thread.is_alive() and "result" in done
    result = done["result"]
    assert sorted(result.rows["search"]) == [1, 2] and sorted(result.rows["worker"]) == [0, 1]
    assert not result.summary["found"] and "errors" not in result.summary
    assert sorted(result.rows["attempts"]) == [1, 2]  # the killed one ran again, once
    logs = [RowLog(p).rows() for p in attempts.glob("*.jsonl")]
    assert sorted(len(rows) for rows in logs) == [1, 2]


@pytest.mark.parametrize("args,message", [
    (["--jobs", "0"], "Error: --jobs: expected >= 1, got 0"),
    (["--jobs", "2"], "Error: --jobs: expected 1 with --executor local"),
    (["--executor", "threads"], "Error: --executor: expected one of local, dask-local, got "
                                "'threads'"),
    (["--scheduler", "not a url"], "Error: --scheduler: expected an address like "
                                   "tcp://HOST:8786"),
    (["--executor", "dask-local", "--scheduler", "tcp://127.0.0.1:8786"],
     "Error: --scheduler: expected no --executor dask-local"),
])
def test_bad_campaign_options_are_one_line_naming_the_option(args, message, tmp_path):
    """Each bad campaign option: one line naming it, exit 1, no run folder."""
    res = CliRunner().invoke(cli, ["fuzz", "--backend", "numpy", "--budget", "1", *args,
                                   "--out", str(tmp_path / "x")])
    assert res.exit_code == 1, res.output
    lines = res.output.strip().splitlines()
    assert len(lines) == 1 and lines[-1].startswith(message)
    assert not (tmp_path / "x").exists()
