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

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis.database import DirectoryBasedExampleDatabase
from hypothesis.errors import Flaky

from ctcbench.fuzz.casefile import write_case
from ctcbench.fuzz.judge import judge, problem_of, tolerance
from ctcbench.fuzz.problems import builds, size
from ctcbench.registry import get_backend
from ctcbench.runstore import new_run_dir, write_meta

FUZZ_DTYPES = ("float64", "float32")
CHUNK = 25  # examples per hypothesis call; the budget is checked between calls
PROGRESS_EVERY_S = 10.0


class Disagreement(AssertionError):
    """The backend is wrong on a drawn problem."""


@dataclass
class Finding:
    what: str  # one line: what is wrong
    size: dict  # T, N, C, L, input_lengths, blank of the shrunk problem
    dtype: str
    case_file: Path


@dataclass
class FuzzResult:
    run_dir: Path
    backend: str
    against: str
    tried: int  # problems run, shrinking steps included
    seconds: float
    finding: Finding | None = None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        d = {"run_dir": str(self.run_dir), "backend": self.backend, "against": self.against,
             "tried": self.tried, "seconds": round(self.seconds, 1), "found": self.finding is not None}
        if self.finding:
            d.update(what=self.finding.what, size=self.finding.size, dtype=self.finding.dtype,
                     case_file=str(self.finding.case_file))
        return d


def _dtypes(backend) -> tuple[str, ...]:
    supported = getattr(backend.impl, "dtypes", None) or FUZZ_DTYPES
    return tuple(d for d in FUZZ_DTYPES if d in supported)


def fuzz(backend_name: str, *, against: str = "numpy", budget: float = 60.0, seed: int = 0,
         out=None, progress: bool = True) -> FuzzResult:
    """Search for a problem on which ``backend_name`` disagrees with ``against`` (or crashes, hangs
    or breaks a gradient invariant) for ``budget`` seconds; shrink the first one found."""
    if not budget > 0:
        raise ValueError(f"budget: expected a positive number of seconds, got {budget!r}")
    if not (isinstance(seed, int) and seed >= 0):
        raise ValueError(f"seed: expected a non-negative integer, got {seed!r}")
    backend, reference = get_backend(backend_name), get_backend(against)
    dtypes = _dtypes(backend)
    if not dtypes:
        raise ValueError(f"backend: expected a backend computing in {' or '.join(FUZZ_DTYPES)}, "
                         f"got {backend_name!r}, which takes only {getattr(backend.impl, 'dtypes')}")
    run_dir = new_run_dir("fuzz", out)
    write_meta(run_dir, {"kind": "fuzz", "backend": backend_name, "against": against,
                         "budget_s": budget, "seed": seed, "dtypes": list(dtypes)})
    state = {"tried": 0, "failing": None, "last_note": time.monotonic()}
    start = time.monotonic()
    deadline = start + budget

    def check(drawn):
        build, dtype = drawn
        state["tried"] += 1
        what = judge(backend, reference, build, dtype)
        now = time.monotonic()
        if progress and now - state["last_note"] >= PROGRESS_EVERY_S:
            state["last_note"] = now
            left = max(0.0, deadline - now)
            print(f"fuzz {backend_name}: {state['tried']} problems, "
                  + ("shrinking" if state["failing"] else f"{left:.0f} s left"), file=sys.stderr)
        if what is not None:
            state["failing"] = (build, dtype, what)
            raise Disagreement(what)

    db = DirectoryBasedExampleDatabase(str(Path(run_dir) / "hypothesis"))
    options = settings(database=db, max_examples=CHUNK, deadline=None, derandomize=False,
                       suppress_health_check=list(HealthCheck), report_multiple_bugs=False,
                       verbosity=Verbosity.quiet, print_blob=False,
                       phases=(Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink))
    chunk = 0
    while time.monotonic() < deadline and state["failing"] is None:
        test = hypothesis_seed(seed * 1_000_003 + chunk)(options(given(builds(dtypes))(check)))
        try:
            test()
        except (Disagreement, Flaky):  # Flaky: a failure that did not repeat (a timeout, say)
            break
        chunk += 1
    result = FuzzResult(run_dir, backend_name, against, state["tried"], time.monotonic() - start)
    if state["failing"] is not None:
        build, dtype, what = state["failing"]  # the last failure is hypothesis's shrunk one
        name = f"fuzz_{backend_name}".replace("-", "_").lower()
        tol = tolerance(problem_of(build, dtype))
        path = write_case(Path(run_dir) / "cases", name, build, dtype, tol,
                          description=f"found by ctcbench fuzz: {what}"[:300],
                          provenance=f"ctcbench fuzz --backend {backend_name} --against {against} "
                                     f"--seed {seed}, shrunk by hypothesis")
        result.finding = Finding(what, size(build), dtype, path)
    return result
