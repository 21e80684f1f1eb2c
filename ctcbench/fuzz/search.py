"""One fuzzing search: hypothesis draws problems from the strategies of ``STRATEGIES``, each
given an equal share of the budget, the backend and an oracle run on each, and the first
failure is shrunk and written as a case file. ``fuzz.run`` makes one search, ``fuzz.campaign``
one per worker of a cluster."""
from __future__ import annotations

import sys
import time
import warnings
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky

from ctcbench.caselib.builders import problem_of
from ctcbench.caselib.casefile import case_name, write_case
from ctcbench.caselib.judge import DIFFERENT_CALLS, problem_tolerance
from ctcbench.fuzz.judge import calls_showing, judge
from ctcbench.fuzz.problems import boundary_builds, builds, size, work
from ctcbench.progress import Progress
from ctcbench.runtime.protocol import BackendUnavailable
from ctcbench.runtime.registry import FAST_ORACLE, REFERENCE, get_backend

# what is drawn, and examples per hypothesis call: the budget is shared by time between the two,
# so a few large problems do not eat it (ctcbench.fuzz.problems)
STRATEGIES = {"small": (builds, 25), "boundary": (boundary_builds, 5)}
SMALL_WORK = 100_000  # problems costing more (problems.work) are judged against FAST_ORACLE
# hypothesis's warnings about itself, which say nothing of the user's backend: a large drawn
# problem's repr; and any change of the process-wide `random` state while it draws, reported as
# a strategy using `random`, which in a Dask worker Dask's own threads make (the strategies
# draw through hypothesis only: tests/fuzz/test_fuzz.py)
QUIET = ("Generating overly large repr", "Do not use the `random` module")
WARM_UP = {"generator": "table", "C": 3, "sample": [{"target": [1], "logits": [[0.0] * 3] * 3}]}


class Disagreement(AssertionError):
    """The backend is wrong on a drawn problem."""


def fast_oracle(backend_name: str, against: str):
    """The oracle of large problems: ``FAST_ORACLE`` where the reference is the default one and
    the backend is not the fast oracle itself; else None (``against`` judges everything)."""
    if against != REFERENCE or backend_name == FAST_ORACLE:
        return None
    try:
        return get_backend(FAST_ORACLE)
    except BackendUnavailable:
        return None


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


def search(backend, reference, dtypes, *, budget, seed, run_dir: Path, progress,
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
            with warnings.catch_warnings():
                for message in QUIET:
                    warnings.filterwarnings("ignore", message=message)
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
        name = case_name(f"fuzz_{backend.name}")
        expect = {}
        if what.startswith(DIFFERENT_CALLS):  # the replay must call as often as it took here
            expect = {"deterministic": True, "calls": calls_showing(backend, build, dtype)}
        path = write_case(run_dir / "cases", name, build, dtype, problem_tolerance(problem_of(build, dtype)),
                          expect=expect, description=f"found by ctcbench fuzz: {what}"[:300],
                          provenance=f"ctcbench fuzz --backend {backend.name} --against "
                                     f"{reference.name} --seed {seed}, shrunk by hypothesis; "
                                     f"judged against {judged_by}")
        summary.update(what=what, size=size(build), dtype=dtype, case_file=str(path))
    return summary
