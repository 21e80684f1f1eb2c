"""Grid runs on a real Dask cluster (LocalCluster of worker processes): the same curves as
the local process pool, a killed worker's run resumed from its checkpoint, and the executor
options' errors."""
import importlib.util
import json
import os
import signal
import threading
import time

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.convergence.runconfig import build
from ctcbench.cluster import check_scheduler
from ctcbench.convergence.executors import DaskExecutor, LocalPool, make_executor
from ctcbench.convergence.grid import run_grid
from ctcbench.runs.store import RowLog

needs_dask = pytest.mark.skipif(importlib.util.find_spec("distributed") is None,
                                reason="needs the [dask] extra: pip install -e '.[dask]'")

TINY = {"data.train_size": 48, "data.test_size": 8, "data.min_len": 1, "data.max_len": 3,
        "steps": 4, "eval_every": 2, "batch_size": 4, "model.channels": 4, "model.hidden": 8}
TINY_ARGS = ["--train-size", "48", "--test-size", "8", "--min-len", "1", "--max-len", "3",
             "--steps", "4", "--eval-every", "2", "--batch-size", "4", "--channels", "4",
             "--hidden", "8"]
TIMING = ("cpu_s", "wall_s")  # the only fields that may differ between two identical runs


@pytest.fixture(scope="module")
def cluster():
    """Two Dask worker processes with one thread each, as `dask worker --nthreads 1` gives."""
    import distributed
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as c:
        yield c


def curves(run_dir):
    """Each run's curve rows without the timing fields: {run name: rows}."""
    return {d.name: [{k: v for k, v in r.items() if k not in TIMING}
                     for r in RowLog(d / "curve.jsonl").rows()]
            for d in sorted((run_dir / "runs").iterdir())}


@pytest.mark.long
@needs_dask
def test_dask_cluster_gives_the_local_pools_curves(tmp_path, cluster):
    """The same grid through --scheduler (a real Dask cluster) and the local process pool:
    identical curve rows, step for step, and a complete run folder."""
    base, grid = build({**TINY, "seed": (0, 1)})
    result = run_grid(base, grid, out=tmp_path / "local", jobs=2, cache_dir=tmp_path / "cache",
                      show_progress=False, executor=LocalPool(2))
    local_dir, local = result.run_dir, result.rows
    out = tmp_path / "dask"
    res = CliRunner().invoke(cli, ["convergence", *TINY_ARGS, "--seed", "0,1", "--out", str(out),
                                   "--cache-dir", str(tmp_path / "cache"),
                                   "--scheduler", cluster.scheduler_address, "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)["runs"]
    assert sorted(r["run"] for r in rows) == sorted(local["run"])
    expected = curves(local_dir)
    assert len(expected) == 2 and all(len(v) == 3 for v in expected.values())  # steps 0, 2, 4
    assert curves(out) == expected
    for name in ("summary.csv", "curves.csv", "verdicts.json", "meta.json"):
        assert (out / name).is_file(), name


@pytest.mark.long
@needs_dask
def test_killed_worker_resumes_its_run_from_the_checkpoint(tmp_path, cluster):
    """A worker process killed mid-run: the run is rescheduled, continues from its last
    checkpoint, and ends with exactly one curve row per eval step."""
    import distributed
    base, grid = build({**TINY, "steps": 300, "eval_every": 5})
    client = distributed.Client(cluster)
    done = {}

    def grid_thread():
        done["result"] = run_grid(base, grid, out=tmp_path / "g", cache_dir=tmp_path / "cache",
                                  show_progress=False,
                                  executor=DaskExecutor(cluster.scheduler_address))

    thread = threading.Thread(target=grid_thread)
    thread.start()
    run = tmp_path / "g" / "runs" / "crnn-rmsprop-lr0.001-s0"
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:  # past the first checkpoint after step 0
        rows = RowLog(run / "curve.jsonl").rows()
        if rows and rows[-1]["step"] >= 20:
            break
        time.sleep(0.05)
    busy = [addr for addr, keys in client.processing().items() if keys]
    assert len(busy) == 1, client.processing()
    pid = client.run(os.getpid, workers=busy)[busy[0]]
    killed_at = RowLog(run / "curve.jsonl").rows()[-1]["step"]
    os.kill(pid, signal.SIGKILL)
    thread.join(timeout=300)
    client.close()
    assert not thread.is_alive() and "result" in done
    assert 20 <= killed_at < 300, killed_at  # the kill came mid-run
    steps = [r["step"] for r in RowLog(run / "curve.jsonl").rows()]
    assert steps == list(range(0, 301, 5))  # every eval once: nothing lost, nothing twice
    attempts = RowLog(run / "attempts.jsonl").rows()
    assert len(attempts) == 2 and attempts[0]["resumed_from"] is None
    assert 15 <= attempts[1]["resumed_from"] <= killed_at  # from a checkpoint, not step 0
    assert done["result"].rows["steps"].tolist() == [300]


@pytest.mark.parametrize("kind,scheduler,message", [
    ("dask-local", "tcp://127.0.0.1:8786", "--scheduler: expected no --executor dask-local"),
    ("threads", None, "--executor: expected one of local, dask-local, got 'threads'"),
    ("local", " ", "--scheduler: expected an address like tcp://HOST:8786"),
])
def test_executor_choice_errors(kind, scheduler, message):
    """Contradictory or unknown executor settings are one clear error naming the option."""
    with pytest.raises(ValueError, match=message):
        make_executor(kind, scheduler=scheduler, jobs=2)


@pytest.mark.parametrize("address", ["tcp://10.0.0.1:8786", "10.0.0.1:8786", "tls://sched:8786",
                                     "tcp://[::1]:8786", "ws://host.example:80"])
def test_scheduler_addresses_dask_takes_pass(address):
    """HOST:PORT, with or without one of Dask's protocols."""
    check_scheduler(address)


@pytest.mark.parametrize("address", ["not a url", "", "tcp://host", "http://host:8786",
                                     "tcp://host:port", "tcp://:8786", "tcp://host:8786/path"])
def test_scheduler_addresses_dask_cannot_take_are_refused(address):
    """No protocol Dask speaks, no port, no host, a path: refused naming --scheduler."""
    with pytest.raises(ValueError, match="^--scheduler: expected an address like tcp://HOST:8786"):
        check_scheduler(address)


def test_a_scheduler_that_is_not_an_address_is_named_before_any_work(tmp_path):
    """--scheduler 'not a url': one error line naming --scheduler; no run folder, no data."""
    res = CliRunner().invoke(cli, ["convergence", *TINY_ARGS, "--out", str(tmp_path / "x"),
                                   "--cache-dir", str(tmp_path / "cache"),
                                   "--scheduler", "not a url"])
    assert res.exit_code == 1, res.output
    assert res.output.strip() == ("Error: --scheduler: expected an address like tcp://HOST:8786 "
                                  "(tcp|tls|ws|wss|ucx://HOST:PORT), got 'not a url'")
    assert not (tmp_path / "x").exists() and not (tmp_path / "cache").exists()


@pytest.mark.long
@needs_dask
def test_unreachable_scheduler_is_a_clean_cli_error(tmp_path):
    """--scheduler pointing at no scheduler ends with one error line, no traceback."""
    res = CliRunner().invoke(cli, ["convergence", *TINY_ARGS, "--out", str(tmp_path / "x"),
                                   "--cache-dir", str(tmp_path / "cache"),
                                   "--scheduler", "tcp://127.0.0.1:9"])
    assert res.exit_code == 1, res.output
    assert "scheduler: expected a running Dask scheduler, got 'tcp://127.0.0.1:9'" in res.output
    assert "Traceback" not in res.output


def test_make_executor_picks_the_backend():
    """--scheduler means Dask on that cluster, dask-local a LocalCluster of --jobs workers."""
    assert isinstance(make_executor("local", jobs=3), LocalPool)
    remote = make_executor("local", scheduler="tcp://10.0.0.1:8786", jobs=3)
    assert isinstance(remote, DaskExecutor) and remote.scheduler == "tcp://10.0.0.1:8786"
    assert make_executor("dask-local", jobs=3).local_workers == 3
