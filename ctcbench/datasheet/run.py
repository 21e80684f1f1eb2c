"""``ctcbench datasheet``: what a CTC implementation can be trusted with, measured.

For each backend asked for, in one run folder: its limits (per axis of ``AXES``, the largest
size at which it is right against an exact oracle and what it does one step past it), its
worst precision (per dtype it takes), what its own framework call does with malformed input,
whether repeated calls give the same bits, and its speed and peak memory at the bench's
target sizes, next to torch's in the same run. Every probe is a row as it is finished, so an
interrupted run resumes where it stopped; ``ctcbench.datasheet.sheet`` reads the rows back
into one datasheet per backend.
"""
from __future__ import annotations

from dataclasses import asdict

import pandas as pd

from ctcbench.caselib.builders import problem_of
from ctcbench.caselib.casefile import write_case
from ctcbench.caselib.judge import problem_tolerance
from ctcbench.core.problem import FLOAT_DTYPES
from ctcbench.datasheet.config import SHARE, STAGES, DatasheetSettings
from ctcbench.datasheet.determinism import DETERMINISM_SIZE, determinism
from ctcbench.datasheet.kind import KIND
from ctcbench.datasheet.limits import WARM_UP, limits, warm_up
from ctcbench.datasheet.precision import CLIMBS, worst_precision
from ctcbench.runtime.malformed import PROBES, try_malformed, valid_losses
from ctcbench.datasheet.sheet import sheets, write_exports
from ctcbench.errors import expect, fail
from ctcbench.progress import Progress
from ctcbench.runs.store import RunResult, check_out, open_run
from ctcbench.runtime.measure import measure_size, resolve_backends, threads_within
from ctcbench.runtime.protocol import BackendUnavailable, UnsupportedProblem
from ctcbench.runtime.registry import (FAST_ORACLE, REFERENCE, backend_names,
                                       backend_versions, check_backend_names, get_backend)
from ctcbench.runtime.sizes import DTYPES as SPEED_DTYPES, TARGET_SIZES
from ctcbench.settings import from_options
from ctcbench.runtime.status import Status

# Seconds the stages outside --budget took per backend (torch and numba, 2-core Intel Xeon,
# 2026-12-02: `ctcbench datasheet --backend torch,numba --budget 10`, docs/datasheet.md)
STAGE_SECONDS = {"robustness": 3.0, "determinism": 2.0, "speed": 25.0}
SPEED_THREADS = 1


def _oracle(name: str, *, fast: bool):
    """The exact float64 oracle for ``name``: the fast one for large problems (``fast``), the
    reference otherwise; never the backend itself."""
    first, other = (FAST_ORACLE, REFERENCE) if fast else (REFERENCE, FAST_ORACLE)
    for candidate in (first, other):
        if candidate == name:
            continue
        try:
            return get_backend(candidate, isolated=False)
        except BackendUnavailable:
            continue
    raise BackendUnavailable(f"no exact oracle for {name!r}: {FAST_ORACLE} and {REFERENCE} "
                             f"cannot run here")


def _takes(backend, dtype: str) -> bool:
    """Whether the backend computes in ``dtype``: its declared dtypes, or a tiny call (which
    also starts its worker and compiles, before any stage's clock starts)."""
    if backend.traits.dtypes is not None:
        if dtype in backend.traits.dtypes:
            warm_up(backend, dtype)
        return dtype in backend.traits.dtypes
    try:
        backend.run(problem_of(WARM_UP, dtype))
    except UnsupportedProblem:
        return False
    except Exception:  # anything else is the stages' to find and report
        return True
    return True


def _speed(name: str, dtype: str, sizes, repeat: int, progress) -> list[dict]:
    """The bench's rows for ``name`` beside torch's, measured interleaved, at ``sizes``, on
    one thread (as ``ctcbench bench`` measures by default)."""
    rows = []
    with threads_within(SPEED_THREADS):
        backends = resolve_backends([name])
        try:
            for size in sizes:
                progress.note(f"{name} {dtype} speed {size.label}")
                for r in measure_size(backends, size, dtype=dtype, repeat=repeat, memory=True,
                                      threads=SPEED_THREADS):
                    if r["backend"] == name:
                        keep = ("T", "N", "C", "L", "status", "reason", "ns_per_cell",
                                "time_median_s", "ratio_to_torch", "peak_rss_mb", "first_call_s")
                        rows.append({"stage": "speed", "item": size.label,
                                     "threads": SPEED_THREADS, **{k: r.get(k) for k in keep}})
                progress.update()
        finally:  # workers started at this count; the next stages start their own
            for b in backends.values():
                if not isinstance(b, tuple):
                    b.close()
    return rows


def _case(run_dir, name: str, build: dict, dtype: str, description: str) -> str:
    problem = problem_of(build, dtype)
    path = write_case(run_dir / "cases", name, build, dtype, problem_tolerance(problem),
                      description=description, provenance="ctcbench datasheet")
    return str(path.relative_to(run_dir))


def _names(backends, all_backends: bool) -> list[str]:
    known = backend_names()
    if all_backends:
        expect(not backends, "--all", "no --backend beside it", ", ".join(backends or []))
        return known
    expect(bool(backends), "--backend", "a backend name (or --all)", "none")
    check_backend_names(backends, "--backend")
    return list(dict.fromkeys(backends))


# what the rows a resume replays depend on; other backends, stages or axes are rows of their own
REPLAYED = tuple(k for k in DatasheetSettings.__dataclass_fields__ if k not in ("stages", "axes"))


def _same_options(meta: dict | None, config: dict) -> None:
    """A resumed folder replays its probes, which hold for the options they were run with."""
    stored = (meta or {}).get("config") or {}
    for key in REPLAYED:
        value = config[key]
        if key in stored and stored[key] != (list(value) if isinstance(value, tuple) else value):
            fail("--resume", f"the options of the run in the folder ({key} = {stored[key]!r})",
                 f"{key} = {value!r}")


class _Sheet:
    """One backend's stages in an open run folder: each writes its rows as they are finished
    and skips what ``done`` (the rows the folder holds, by key) already has."""

    def __init__(self, name: str, run, done: dict, bar, config: DatasheetSettings):
        self.name, self.run, self.done, self.bar, self.config = name, run, done, bar, config
        self.backend, self.taken, self.main = None, [], []

    def write(self, row: dict, dtype: str | None = None) -> None:
        row = {"backend": self.name, "dtype": dtype, **row}
        self.run.log.append(row)
        self.done[self.name, dtype, row["stage"], row["item"]] = row

    def writer(self, dtype):
        return lambda row: self.write(row, dtype)

    def has(self, dtype, stage: str, item: str) -> bool:
        return (self.name, dtype, stage, item) in self.done

    def done_for(self, dtype) -> dict:
        return {(s, i): r for (b, d, s, i), r in self.done.items() if b == self.name and d == dtype}

    def load(self, dtypes) -> bool:
        """Start the backend in its worker; False (and a "skipped" row) where it cannot run."""
        try:
            self.backend = get_backend(self.name, isolated=True)
        except BackendUnavailable as exc:  # with --all; a named one was checked before
            if not self.has(None, "info", "backend"):
                self.write({"stage": "info", "item": "backend", "status": Status.SKIPPED,
                            "detail": str(exc)})
            return False
        b = self.backend
        self.taken = [d for d in (dtypes or FLOAT_DTYPES) if _takes(b, d)]
        self.main = [d for d in self.taken if d in (dtypes or ("float32",))] or self.taken[:1]
        if not self.taken:  # --dtype asked only for what it does not compute in
            if not self.has(None, "info", "backend"):
                self.write({"stage": "info", "item": "backend", "status": Status.SKIPPED,
                            "detail": f"takes none of --dtype {','.join(dtypes)} (it takes "
                                      f"{', '.join(b.traits.dtypes or ('none tried',))})"})
            b.close()
            return False
        if not self.has(None, "info", "backend"):
            self.write({"stage": "info", "item": "backend", "status": Status.OK,
                        "device": b.traits.device, "dtypes": self.taken,
                        "nondeterministic": b.traits.nondeterministic,
                        "raw_ctc": b.traits.has_raw_ctc,
                        "versions": backend_versions([b]).get(self.name, {})})
        return True

    def limits(self) -> None:
        c = self.config
        oracle = _oracle(self.name, fast=True)
        for dtype in self.main:
            warm_up(oracle, dtype)
            limits(self.backend, oracle, dtype, axes=c.axes,
                   budget_s=c.budget * SHARE["limits"] / len(self.main),
                   timeout_s=c.timeout, max_bytes=c.max_bytes, seed=c.seed,
                   done=self.done_for(dtype), write=self.writer(dtype), progress=self.bar)

    def precision(self) -> None:
        c = self.config
        oracle = _oracle(self.name, fast=False)
        for dtype in self.taken:
            if self.has(dtype, "precision", dtype):
                continue
            warm_up(oracle, dtype)
            verdict = worst_precision(
                self.backend, oracle, dtype,
                budget_s=c.budget * SHARE["precision"] / len(self.taken),
                timeout_s=c.timeout, max_bytes=c.max_bytes, seed=c.seed,
                trials=c.trials, done=self.done_for(dtype), write=self.writer(dtype),
                progress=self.bar)
            for key in CLIMBS:
                if key in verdict:
                    verdict[key]["case_file"] = _case(
                        self.run.run_dir, f"worst_{key}_{self.name}_{dtype}",
                        verdict[key]["build"], dtype, f"the largest {CLIMBS[key]} of "
                        f"{self.name} in {dtype} that ctcbench datasheet found")
            self.write(verdict, dtype)

    def robustness(self) -> None:
        valid = valid_losses()
        for malformed in PROBES:
            if not self.has(None, "robustness", malformed.name):
                self.bar.note(f"{self.name} malformed: {malformed.name}")
                self.write(try_malformed(self.backend, malformed, valid=valid,
                                         timeout_s=min(self.config.timeout, 30.0)))
                self.bar.update()

    def determinism(self) -> None:
        for dtype in self.main:
            if self.has(dtype, "determinism", DETERMINISM_SIZE.label):
                continue
            self.bar.note(f"{self.name} {dtype} determinism")
            self.write(determinism(self.backend, dtype), dtype)

    def speed(self) -> None:
        for dtype in self.main:
            if dtype in SPEED_DTYPES:
                todo = [z for z in TARGET_SIZES if not self.has(dtype, "speed", z.label)]
                for row in _speed(self.name, dtype, todo, self.config.repeat, self.bar):
                    self.write(row, dtype)


def estimate(backends: int, budget: float, stages) -> str:
    """What the run will take, said before it starts: the searches' share of ``budget`` and
    the measured ``STAGE_SECONDS`` of the other stages, per backend."""
    searches = budget * sum(SHARE[s] for s in SHARE if s in stages)
    others = sum(STAGE_SECONDS[s] for s in STAGE_SECONDS if s in stages)
    total = backends * (searches + others)
    return (f"datasheet: {backends} backend{'s' * (backends != 1)} x ({searches:g} s of "
            f"searches (--budget) + about {others:.0f} s of the other stages): about "
            f"{total / 60:.1f} min in all; a probe that hangs adds up to --timeout")


def datasheet(backends=None, *, all_backends: bool = False, out=None, resume: bool = False,
              progress: bool | None = True, **options) -> RunResult:
    """The datasheet of each backend in ``backends`` (or every registered one: ``all_backends``).

    ``options``: the fields of :class:`ctcbench.datasheet.config.DatasheetSettings`, each
    with its default and help there: ``dtypes`` (default: limits, determinism and speed in
    float32, precision in every dtype the backend takes), ``budget`` (seconds per backend for
    the two searches, split by ``SHARE``: the limits' share among the axes, precision's among
    the dtypes; the other stages take what they take), ``timeout`` (the most one probe may
    take; more is a hang), ``max_memory_mb`` (sizes estimated to need more are not run),
    ``stages``, ``axes``, ``seed``, ``repeat`` (measurements per speed size) and ``trials`` (the
    most candidates of the precision search per dtype: with a count, its verdict is the seed's
    alone). ``out``/``resume``: the run-folder rules of every driver.
    """
    settings = from_options(DatasheetSettings, options, "datasheet()")
    names = _names(list(backends or []), all_backends)
    for name in names if not all_backends else ():  # before any folder is made
        try:
            get_backend(name, isolated=False)
        except BackendUnavailable as exc:
            fail("--backend", f"a backend that runs here ({name!r} cannot: {exc})", name)
    check_out(KIND, out, resume=resume)
    config = {"backends": names, "all": all_backends,
              **{k: list(v) if isinstance(v, tuple) else v for k, v in asdict(settings).items()}}
    with open_run(KIND, out, resume=resume) as run, \
            Progress("datasheet", unit="probes", enabled=progress) as bar:
        _same_options(run.meta, asdict(settings))
        kept = run.rows()
        run.write_meta(config)
        done = {(r.get("backend"), r.get("dtype"), r.get("stage"), r.get("item")): r for r in kept}
        bar.say(estimate(len(names), settings.budget, settings.stages))
        for name in names:
            bar.stage(f"datasheet {name}")
            sheet = _Sheet(name, run, done, bar, settings)
            if sheet.load(settings.dtypes):
                for stage in STAGES:
                    if stage in settings.stages:
                        getattr(sheet, stage)()
                sheet.backend.close()
        rows = run.rows()
        files = write_exports(run.run_dir, rows, run.meta)
    sheet = sheets(rows)
    summary = {"backends": len(sheet), "rows": len(rows), "sheets": sheet}
    return RunResult(run.run_dir, pd.DataFrame(rows), summary, run.environment,
                     resumed=len(kept), files=files)
