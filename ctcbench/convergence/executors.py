"""Where the runs of a grid execute: one interface, a local process pool or a Dask cluster.

Every executor takes the same list of :class:`RunTask` and returns when each run's folder is
complete. Results come home through the run folder, not through the executor: each run
writes ``runs/<name>/`` as it goes (config, curve rows, checkpoint, and ``summary.json`` when
it finishes) and the client reads the summaries back from there (:func:`collect`). This works
on one machine and on a cluster whose workers share the run folder's filesystem (NFS, a
cluster filesystem, the same path mounted everywhere); workers that cannot see the folder
are an error when the summaries are collected.

  * ``LocalPool(jobs)``: spawned worker processes on this machine (in this process when
    ``jobs`` is 1 or there is one run); the default.
  * ``DaskExecutor(scheduler="tcp://HOST:PORT")``: each run is one task on a running Dask
    cluster (``dask scheduler`` and ``dask worker --nthreads 1``).
  * ``DaskExecutor(local_workers=n)``: a ``LocalCluster`` of ``n`` worker processes with one
    thread each, for the duration of the grid.

A Dask worker that dies mid-run: the scheduler gives the task to another worker (and a task
that raises is retried, ``retries``); the new attempt continues from the run's last
checkpoint (``train_run`` with ``resume``), so no step is lost or logged twice. Each grid
invocation marks its runs with a token (logged in ``runs/<name>/attempts.jsonl``) so that
only a retry of the same invocation resumes; a fresh grid started over an old folder starts
from scratch.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import threading
import time
import uuid
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ctcbench.cluster import check_executor, dask_client

RETRIES = 3  # per run, on top of the scheduler's own rescheduling after a worker dies


@dataclass(frozen=True)
class RunTask:
    """One run of a grid: its name, config and folder (absolute, so a worker with another
    working directory finds it)."""

    name: str
    cfg: object  # a TrainConfig
    run_dir: Path
    cache_dir: Path | None
    resume: bool
    token: str | None = None  # this grid invocation's mark; set by executors that retry


def run_task(task: RunTask, progress: Callable[[int], None] | None = None) -> str:
    """Train one run into its folder (in whatever process runs it); returns its name.

    Resumes from the run's checkpoint when the grid is resumed, or when an earlier attempt
    of the same invocation (same ``token``) was cut short. With a token, each attempt is
    logged to ``runs/<name>/attempts.jsonl``: ``{"token", "resumed_from"}`` (the step of the
    checkpoint it found, or null for none or an unreadable one)."""
    from ctcbench.convergence.checkpoints import checkpoint_step
    from ctcbench.convergence.train import train_run
    from ctcbench.runs.store import RowLog
    resume = task.resume
    if task.token is not None:
        task.run_dir.mkdir(parents=True, exist_ok=True)
        attempts = RowLog(task.run_dir / "attempts.jsonl")
        resume = resume or any(r.get("token") == task.token for r in attempts.rows())
        start = checkpoint_step(task.run_dir / "checkpoint.pt") if resume else None
        attempts.append({"token": task.token, "resumed_from": start})
    train_run(task.cfg, task.run_dir, cache_dir=task.cache_dir, resume=resume, progress=progress)
    return task.name


def read_summary(t: RunTask) -> dict:
    """A finished run's summary row, read from its folder."""
    import json
    path = t.run_dir / "summary.json"
    if not path.is_file():
        raise FileNotFoundError(
            f"run folder: expected {path} written by the worker that ran {t.name!r}, got no "
            f"such file (Dask workers must share the run folder's filesystem with the client)")
    row = json.loads(path.read_text())
    # to_json spelled a diverged run's inf/nan as strings: numbers again, as train_run returned
    return {k: float(v) if v in ("inf", "-inf", "nan") else v for k, v in row.items()}


def collect(tasks: list[RunTask]) -> dict[str, dict]:
    """Each finished run's summary, read from its folder: ``{name: summary row}``."""
    return {t.name: read_summary(t) for t in tasks}


Finished = Callable[[str, dict], None]  # (run name, summary row), called as each run finishes


class LocalPool:
    """Runs in spawned processes on this machine; ``jobs`` at a time. A worker whose parent
    is gone (the grid was killed) exits within a second, so a killed grid leaves no run
    training on behind the back of a later ``--resume``."""

    def __init__(self, jobs: int = 1):
        if jobs < 1:
            raise ValueError(f"jobs: expected >= 1, got {jobs}")
        self.jobs = jobs

    def run(self, tasks: list[RunTask], progress: Callable[[int], None] | None = None,
            finished: Finished | None = None) -> dict:
        if self.jobs == 1 or len(tasks) == 1:
            for t in tasks:
                run_task(t, progress)
                if finished:
                    finished(t.name, read_summary(t))
            return collect(tasks)
        ctx = mp.get_context("spawn")  # fresh interpreters: no forked torch thread pools
        queue = ctx.SimpleQueue()  # steps done, from every worker; handed over at spawn
        with ProcessPoolExecutor(self.jobs, mp_context=ctx, initializer=_local_worker,
                                 initargs=(os.getpid(), queue)) as pool:
            submitted = {pool.submit(_run_reporting, t): t for t in tasks}
            pending = set(submitted)
            while pending:
                done = {f for f in pending if f.done()}
                pending -= done
                for f in done:
                    f.result()  # a run's exception surfaces here
                    if finished:
                        finished(submitted[f].name, read_summary(submitted[f]))
                while not queue.empty():
                    n = queue.get()
                    if progress:
                        progress(n)
                if pending:
                    time.sleep(0.2)
        return collect(tasks)


_steps_queue = None  # in a LocalPool worker: where steps done are reported


def _local_worker(parent_pid: int, queue) -> None:
    """A LocalPool worker's start: keep the progress queue, and exit when the parent dies."""
    global _steps_queue
    _steps_queue = queue

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(1.0)
        os._exit(1)  # orphaned: the grid that wanted this run is gone
    threading.Thread(target=watch, daemon=True, name="ctcbench-parent-watch").start()


def _run_reporting(task: RunTask) -> str:
    return run_task(task, _steps_queue.put)


class DaskExecutor:
    """Runs as Dask tasks: on the cluster at ``scheduler`` (``tcp://HOST:PORT``), or on a
    ``LocalCluster`` of ``local_workers`` processes with one thread each."""

    def __init__(self, scheduler: str | None = None, *, local_workers: int | None = None,
                 retries: int = RETRIES):
        if (scheduler is None) == (local_workers is None):
            raise ValueError("executor: expected a scheduler address or a local worker count, "
                             f"got scheduler={scheduler!r}, local_workers={local_workers!r}")
        if local_workers is not None and local_workers < 1:
            raise ValueError(f"jobs: expected >= 1, got {local_workers}")
        self.scheduler, self.local_workers, self.retries = scheduler, local_workers, retries

    def client(self):
        """A connected ``distributed.Client`` and the cluster it started (or ``None``)."""
        return dask_client(self.scheduler, self.local_workers)

    def run(self, tasks: list[RunTask], progress: Callable[[int], None] | None = None,
            finished: Finished | None = None) -> dict:
        from distributed import as_completed
        token = uuid.uuid4().hex
        tasks = [RunTask(t.name, t.cfg, t.run_dir.resolve(),
                         None if t.cache_dir is None else Path(t.cache_dir).resolve(),
                         t.resume, token) for t in tasks]
        client, cluster = self.client()
        try:
            futures = {client.submit(run_task, t, key=f"ctcbench-run-{t.name}-{token}",
                                     retries=self.retries, pure=False): t for t in tasks}
            for f in as_completed(futures):
                f.result()  # a run that failed on every attempt surfaces here
                if finished:
                    finished(futures[f].name, read_summary(futures[f]))
                if progress:
                    progress(futures[f].cfg.steps)  # per finished run: workers are elsewhere
        finally:
            client.close()
            if cluster is not None:
                cluster.close()
        return collect(tasks)


def make_executor(kind: str = "local", *, scheduler: str | None = None, jobs: int = 1):
    """The executor for ``--executor``/``--scheduler``: a scheduler address means Dask on that
    cluster; ``dask-local`` a LocalCluster of ``jobs`` workers; ``local`` the process pool."""
    check_executor(kind, scheduler)
    if scheduler is not None:
        return DaskExecutor(scheduler)
    if kind == "dask-local":
        return DaskExecutor(local_workers=jobs)
    return LocalPool(jobs)
