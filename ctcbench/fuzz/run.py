"""``ctcbench fuzz``: property-based differential testing of one backend against a reference.

Hypothesis draws problems (:mod:`ctcbench.fuzz.problems`), the backend and the reference run on
each, and :func:`ctcbench.fuzz.judge.judge` says what is wrong, if anything. On the first
failure hypothesis shrinks the problem to a minimal one, which is written as a case file into
``<run>/cases/``; ``ctcbench compare --cases <run>/cases --backend NAME`` reproduces it. The
hypothesis database lives in ``<run>/hypothesis/``: a rerun on the same folder replays the
failures first. The budget bounds the search; shrinking a found problem takes what it takes
(seconds on small problems).
"""
from __future__ import annotations

import os
import sys
import time
from pathlib import Path


import pandas as pd
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky

from ctcbench.cluster import check_executor
from ctcbench.errors import expect
from ctcbench.fuzz.campaign import campaign
from ctcbench.fuzz.casefile import write_case
from ctcbench.caselib.judge import problem_tolerance
from ctcbench.fuzz.judge import judge, problem_of
from ctcbench.fuzz.problems import boundary_builds, builds, size, work
from ctcbench.progress import Progress
from ctcbench.runtime.protocol import BackendUnavailable
from ctcbench.runtime.registry import REFERENCE, get_backend
from ctcbench.fuzz.kind import KIND
from ctcbench.runs.store import RunResult, check_out, open_run

FUZZ_DTYPES = ("float64", "float32", "float16", "bfloat16")  # what --dtype may ask for
DEFAULT_DTYPES = ("float64", "float32")  # drawn without --dtype
# what is drawn, and examples per hypothesis call: the budget is shared by time between the two,
# so a few large problems do not eat it (ctcbench.fuzz.problems)
STRATEGIES = {"small": (builds, 25), "boundary": (boundary_builds, 5)}
FAST_ORACLE = "numba"  # exact against the reference (its own tests, and fuzzed clean)
SMALL_WORK = 100_000  # problems costing more (problems.work) are judged against FAST_ORACLE
WARM_UP = {"generator": "table", "C": 3, "sample": [{"target": [1], "logits": [[0.0] * 3] * 3}]}


class Disagreement(AssertionError):
    """The backend is wrong on a drawn problem."""


def _dtypes(backend, wanted=None) -> tuple[str, ...]:
    supported = backend.traits.dtypes or FUZZ_DTYPES
    return tuple(d for d in wanted or DEFAULT_DTYPES if d in supported)


def fuzz(backend_name: str, *, against: str = REFERENCE, budget: float = 60.0, seed: int = 0,
         dtypes=None, out=None, resume: bool = False, progress: bool = True,
         executor: str = "local", scheduler: str | None = None,
         jobs: int | None = None) -> RunResult:
    """Search for a problem on which ``backend_name`` disagrees with ``against`` (or crashes, hangs
    or breaks a gradient invariant) for ``budget`` seconds; shrink the first one found.

    ``dtypes``: draw only these (of ``FUZZ_DTYPES``; default float64 and float32), as far as
    the backend takes them; below float64 each is judged with the round-off bound of its
    arithmetic (``ctcbench.caselib.judge.problem_tolerance``).
    ``out``: run folder (default ``reports/fuzz-<UTC time>``); ``resume`` searches again in an
    existing one, replaying the failures its hypothesis database holds first. Returns a
    ``RunResult`` with one row per search made in the folder; ``summary`` holds this search:
    ``tried``, ``seconds``, ``found`` and, when found, ``what``, ``size``, ``dtype``, ``case_file``.

    ``executor="dask-local"`` (``jobs`` worker processes, default min(2, CPUs)) or a
    ``scheduler`` address: a campaign of ``jobs`` searches at once (default one per worker of
    the cluster), each on its own seed, one row each (:mod:`ctcbench.fuzz.campaign`); the
    summary is the campaign's, with the first find.
    """
    if not (isinstance(budget, (int, float)) and budget > 0):
        raise ValueError(f"budget: expected a positive number of seconds, got {budget!r}")
    if not (isinstance(seed, int) and seed >= 0):
        raise ValueError(f"seed: expected a non-negative integer, got {seed!r}")
    check_executor(executor, scheduler)
    expect(jobs is None or (isinstance(jobs, int) and jobs >= 1), "--jobs", ">= 1", jobs)
    on_dask = scheduler is not None or executor == "dask-local"
    expect(on_dask or jobs in (None, 1), "--jobs",
           "1 with --executor local (several searches at once: --executor dask-local or "
           "--scheduler)", jobs)
    if executor == "dask-local" and jobs is None:
        jobs = min(2, os.cpu_count() or 1)
    check_out(KIND, out, resume=resume)
    bad = [d for d in dtypes or () if d not in FUZZ_DTYPES]
    if bad:
        raise ValueError(f"dtype: expected one of {', '.join(FUZZ_DTYPES)}, got {', '.join(bad)}")
    backend, reference = _loaded(backend_name, "--backend"), _loaded(against, "--against")
    fast = _fast_oracle(backend_name, against)
    asked, dtypes = dtypes or DEFAULT_DTYPES, _dtypes(backend, dtypes)
    if not dtypes:
        raise ValueError(f"--dtype: expected a dtype {backend_name!r} computes in "
                         f"({', '.join(backend.traits.dtypes)}), got {', '.join(asked)}")
    with open_run(KIND, out, resume=resume) as run:
        if not resume:
            run.write_meta({"backend": backend_name, "against": against, "dtypes": list(dtypes)})
        kept = len(run.rows())
        if on_dask:
            summary = campaign(run, backend_name, against, dtypes, budget=budget, seed=seed,
                               scheduler=scheduler, jobs=jobs)
        else:
            for b in (backend, reference) + ((fast,) if fast is not None else ()):
                warm_up(b, dtypes)  # imports and compilation are not charged to the budget
            summary = _search(backend, reference, dtypes, budget=budget, seed=seed,
                              run_dir=Path(run.run_dir), progress=progress, fast=fast)
            run.log.append({"search": kept + 1, **summary, "seed": seed, "budget_s": budget})
        rows = pd.DataFrame(run.rows())
    files = [Path(summary["case_file"])] if summary["found"] else []
    return RunResult(run.run_dir, rows, summary, run.environment, resumed=kept, files=files)


def _fast_oracle(backend_name: str, against: str):
    """The oracle of large problems: ``FAST_ORACLE`` where the reference is the default one and
    the backend is not the fast oracle itself; else None (``against`` judges everything)."""
    if against != REFERENCE or backend_name == FAST_ORACLE:
        return None
    try:
        return get_backend(FAST_ORACLE)
    except BackendUnavailable:
        return None


def _loaded(name: str, option: str):
    """The backend ``name``; one that cannot run here is an error naming ``option``."""
    try:
        return get_backend(name)
    except BackendUnavailable as exc:
        raise ValueError(f"{option}: {name!r} cannot run here: {exc}") from None


def warm_up(backend, dtypes, *, slow_s: float = 1.0) -> float:
    """One call on a tiny problem per dtype, so that loading and compiling happen before the
    clock starts; says so on stderr when it takes longer than ``slow_s``. Returns its seconds."""
    import threading
    start = time.monotonic()
    note = threading.Timer(slow_s, lambda: print(
        f"fuzz: {backend.name}: first call (loading, compiling) takes more than {slow_s:g} s; "
        f"not counted in --budget", file=sys.stderr, flush=True))
    note.start()
    try:
        for dtype in dtypes:
            problem = problem_of(WARM_UP, dtype)  # bfloat16 too (through torch)
            try:
                backend.run(problem)
            except Exception:  # the search reports whatever is wrong with it
                pass
    finally:
        note.cancel()
    return time.monotonic() - start


def _search(backend, reference, dtypes, *, budget, seed, run_dir: Path, progress,
            fast=None, claim=None, stopped=None) -> dict:
    """One hypothesis search into ``run_dir``: what was tried and what was found. Calls of
    hypothesis alternate between the strategies of ``STRATEGIES``, each given an equal share
    of the time; problems costing more than ``SMALL_WORK`` are judged against ``fast``.

    In a campaign of several searches: ``claim()`` is asked on the first failure whether this
    search is the one to shrink and write it (False: another search found one first), and
    ``stopped()`` says that another search has, which ends this one."""
    def _stopped():
        return stopped is not None and stopped()

    state = {"tried": 0, "failing": None, "largest": {"T": 0, "L": 0, "C": 0, "N": 0}}
    spent = dict.fromkeys(STRATEGIES, 0.0)
    start = time.monotonic()
    deadline = start + budget
    bar = Progress(f"fuzz {backend.name}", unit="problems", enabled=progress)

    def check(drawn):
        build, dtype = drawn
        if state["failing"] is None and (time.monotonic() > deadline or _stopped()):
            return  # the budget ran out within a call of hypothesis, or another search found
        state["tried"] += 1
        drawn_size = size(build)
        for k, v in state["largest"].items():
            state["largest"][k] = max(v, drawn_size[k])
        oracle = fast if fast is not None and work(build) > SMALL_WORK else reference
        what = judge(backend, oracle, build, dtype)
        bar.note("shrinking" if state["failing"] or what else
                 f"{max(0.0, deadline - time.monotonic()):.0f} s left")
        bar.update()
        if what is not None:
            if state["failing"] is None and claim is not None and not claim():
                return  # another search of the campaign shrinks its own find
            state["failing"] = (build, dtype, what, oracle.name)
            raise Disagreement(what)

    def test_of(kind: str):
        def test(drawn):
            check(drawn)
        # its own key in the database, so a failure is replayed by the strategy that drew it
        test._hypothesis_internal_add_digest = kind.encode()
        return test

    tests = {kind: test_of(kind) for kind in STRATEGIES}
    db = DirectoryBasedExampleDatabase(str(run_dir / "hypothesis"))
    chunk = 0
    while time.monotonic() < deadline and state["failing"] is None and not _stopped():
        kind = min(spent, key=spent.get)  # the strategy that has had the least time
        strategy, examples = STRATEGIES[kind]
        options = settings(database=db, max_examples=examples, deadline=None,
                           derandomize=False, suppress_health_check=list(HealthCheck),
                           report_multiple_bugs=False, verbosity=Verbosity.quiet,
                           print_blob=False,
                           phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink))
        test = hypothesis_seed(seed * 1_000_003 + chunk)(
            options(given(strategy(dtypes))(tests[kind])))
        began = time.monotonic()
        try:
            test()
        except (Disagreement, Flaky):  # Flaky: a failure that did not repeat (a timeout, say)
            break
        finally:
            spent[kind] += time.monotonic() - began
        chunk += 1
    bar.close()
    summary = {"backend": backend.name, "against": reference.name, "tried": state["tried"],
               "seconds": round(time.monotonic() - start, 1), "largest": state["largest"],
               "found": state["failing"] is not None}
    if state["failing"] is not None:
        build, dtype, what, judged_by = state["failing"]  # the last one: hypothesis's shrunk one
        name = f"fuzz_{backend.name}".replace("-", "_").lower()
        path = write_case(run_dir / "cases", name, build, dtype, problem_tolerance(problem_of(build, dtype)),
                          description=f"found by ctcbench fuzz: {what}"[:300],
                          provenance=f"ctcbench fuzz --backend {backend.name} --against "
                                     f"{reference.name} --seed {seed}, shrunk by hypothesis; "
                                     f"judged against {judged_by}")
        summary.update(what=what, size=size(build), dtype=dtype, case_file=str(path))
    return summary
