"""A fuzz campaign on Dask: several searches at once, one task each, on a ``LocalCluster``
(``--executor dask-local``) or a running cluster (``--scheduler``).

Each search draws from its own seed (``seed * 1000 + worker``) and all of them share the
hypothesis database in ``<run>/hypothesis/`` (a directory of files, safe to share on one
filesystem), so what one finds the others, and a resumed campaign, replay. The first search to
find a failure claims it (``campaigns/<token>.found``, created exclusively) and shrinks it and
writes its case file; the others see the claim and stop. Rows are written here, by the client,
one per finished task, so a task that Dask runs again (its worker died: the scheduler
reschedules it; it raised: ``retries``) still gives one row. A rerun attempt searches for what
is left of the budget since the first attempt began (``campaigns/<token>-<worker>.jsonl``
logs each attempt); a search that failed on every attempt is a row with its ``error``.
"""
from __future__ import annotations

import os
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

RETRIES = 3  # per search, on top of the scheduler's own rescheduling after a worker dies


@dataclass(frozen=True)
class SearchTask:
    """One search of a campaign, as a worker gets it: ``specs`` names how to build each
    backend (``"module:attr"``) where the worker does not know it."""

    worker: int
    backend: str
    against: str
    specs: dict
    dtypes: tuple
    budget: float
    seed: int
    run_dir: Path  # absolute: a worker with another working directory finds it
    token: str  # this campaign's mark


def worker_seed(seed: int, worker: int) -> int:
    return seed * 1000 + worker


def _claim_path(task: SearchTask) -> Path:
    return task.run_dir / "campaigns" / f"{task.token}.found"


def _claimed_by(task: SearchTask) -> int | None:
    try:
        return int(_claim_path(task).read_text() or -1)
    except (FileNotFoundError, ValueError):
        return None


def _claim(task: SearchTask) -> bool:
    """True when this search is the campaign's first to find (or found it on an earlier
    attempt); False when another search claimed first."""
    path = _claim_path(task)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY)
    except FileExistsError:
        return _claimed_by(task) == task.worker
    with os.fdopen(fd, "w") as f:
        f.write(str(task.worker))
    return True


def run_search(task: SearchTask) -> dict:
    """One search of a campaign, in whatever process runs it: its summary row."""
    from ctcbench.fuzz.search import fast_oracle, search, warm_up
    from ctcbench.runs.store import RowLog
    from ctcbench.runtime.registry import backend_names, get_backend, register_backend
    for name, spec in task.specs.items():
        if name not in backend_names():  # registered in the client only (not an entry point)
            register_backend(name, spec)
    backend, reference = get_backend(task.backend), get_backend(task.against)
    fast = fast_oracle(task.backend, task.against)
    loaded = (backend, reference) + ((fast,) if fast is not None else ())
    try:
        for b in loaded:
            warm_up(b, task.dtypes)
        (task.run_dir / "campaigns").mkdir(parents=True, exist_ok=True)
        attempts = RowLog(task.run_dir / "campaigns" / f"{task.token}-{task.worker}.jsonl")
        earlier = attempts.rows()
        attempts.append({"worker": task.worker, "started": time.time()})
        budget = task.budget
        if earlier and _claimed_by(task) != task.worker:  # the claimer may shrink again
            budget = max(0.0, task.budget - (time.time() - earlier[0]["started"]))
        summary = search(backend, reference, task.dtypes, budget=budget, seed=task.seed,
                          run_dir=task.run_dir, progress=False, fast=fast,
                          claim=lambda: _claim(task),
                          stopped=lambda: _claimed_by(task) not in (None, task.worker))
    finally:
        for b in loaded:
            b.close()
    return {**summary, "attempts": len(earlier) + 1}


def campaign(run, backend: str, against: str, dtypes, *, budget: float, seed: int,
             scheduler: str | None, jobs: int | None) -> dict:
    """Run ``jobs`` searches on Dask (the cluster at ``scheduler``, else a LocalCluster of
    ``jobs`` processes), appending one row per search to ``run.log`` as each ends; returns
    the campaign's summary: problems tried by all, the largest sizes, and the find."""
    from distributed import as_completed

    from ctcbench.cluster import dask_client
    from ctcbench.runtime.registry import backend_spec
    specs = {name: backend_spec(name) for name in {backend, against}}
    token = uuid.uuid4().hex
    start = time.monotonic()
    client, cluster = dask_client(scheduler, None if scheduler else jobs)
    rows = []
    try:
        if jobs is None:  # one search per worker of the cluster
            jobs = max(1, len(client.scheduler_info()["workers"]))
        tasks = [SearchTask(w, backend, against, specs, tuple(dtypes), budget,
                            worker_seed(seed, w), Path(run.run_dir).resolve(), token)
                 for w in range(jobs)]
        futures = {client.submit(run_search, t, key=f"ctcbench-fuzz-{token}-{t.worker}",
                                 retries=RETRIES, pure=False): t for t in tasks}
        first = len(run.rows())
        for f in as_completed(futures):
            t = futures[f]
            try:
                summary = f.result()
            except Exception as exc:  # failed on every attempt: reported, the others go on
                summary = {"backend": backend, "against": against, "tried": 0, "seconds": 0.0,
                           "found": False, "error": f"{type(exc).__name__}: {exc}"[:300]}
            row = {"search": first + len(rows) + 1, **summary, "seed": t.seed,
                   "budget_s": budget, "worker": t.worker}
            run.log.append(row)
            rows.append(row)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
    found = [r for r in rows if r["found"]]
    largest = {k: max(r.get("largest", {}).get(k, 0) for r in rows) for k in ("T", "L", "C", "N")}
    summary = {"backend": backend, "against": against, "tried": sum(r["tried"] for r in rows),
               "seconds": round(time.monotonic() - start, 1), "largest": largest,
               "found": bool(found), "workers": len(rows)}
    if found:
        summary.update({k: found[0][k] for k in ("what", "size", "dtype", "case_file")})
    errors = [r["error"] for r in rows if r.get("error")]
    if errors:
        summary["errors"] = errors
    return summary
