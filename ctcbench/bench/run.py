"""Speed and peak memory of every backend's forward+backward over a grid of sizes.

What is timed: ``backend.run(problem)`` end to end, the same work for every backend:
log_softmax of the logits, the CTC forward and backward, the gradient w.r.t. the logits,
and the adapter's conversions in and out (NumPy float64 results). One untimed warm-up
call per backend and size comes first. Repeats are interleaved across backends (repeat 1
of every backend, then repeat 2, ...), so load on a shared machine hits all of them alike,
and each backend's ratio to ``torch`` is taken pair by pair within one repeat.

Peak memory: one extra, untimed call per backend and size, with the resident set size
(RSS, ``/proc/self/statm``) sampled every 0.5 ms by a thread; reported is the peak minus the
RSS just before the call, after ``malloc_trim`` has handed freed heap memory back to the
OS. It counts what any library allocates (NumPy, torch, BLAS), but not peaks shorter than
the sampling interval, nor memory the allocator still held from an earlier call.
"""
from __future__ import annotations

import csv
import ctypes
import json
import os
import sys
import threading
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ctcbench.core.problem import CTCProblem
from ctcbench.registry import (BackendFailure, BackendUnavailable, UnsupportedProblem, backend_names,
                               get_backend)
from ctcbench.runstore import RowLog, new_run_dir, read_text, write_meta
from ctcbench.worker import THREADS_ENV

REFERENCE = "torch"  # every ratio is to this backend, measured in the same run
DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class Size:
    """One benchmark size: ``T`` frames, ``N`` batch, ``C`` classes (blank included),
    ``L`` labels per target (every target has exactly L labels, every input T frames)."""

    T: int
    N: int
    C: int
    L: int

    @property
    def cells(self) -> int:
        """Dynamic-programming cells of one pass, ``T * N * S`` with ``S = 2L + 1``."""
        return self.T * self.N * (2 * self.L + 1)

    @property
    def label(self) -> str:
        return f"T={self.T} N={self.N} C={self.C} L={self.L}"


# The four sizes for the NumPy-vs-torch target.
TARGET_SIZES = [Size(1000, 32, 100, 200), Size(200, 16, 50, 40), Size(50, 8, 20, 10),
                Size(1000, 8, 5000, 100)]


def _sweeps(base: Size, **values) -> list[Size]:
    """``base`` with one letter varied at a time, e.g. ``T=[100, 200]``."""
    out = []
    for letter, vals in values.items():
        out += [Size(**{**asdict(base), letter: v}) for v in vals]
    return out


def _unique(sizes) -> list[Size]:
    return list(dict.fromkeys(sizes))


GRIDS: dict[str, list[Size]] = {
    "small": [Size(50, 8, 20, 10), Size(100, 8, 30, 20), Size(200, 16, 50, 40)],
    # how cost grows with T, with L (S = 2L + 1), with C (up to 5000) and with N
    "default": _unique(
        _sweeps(Size(200, 16, 50, 40), T=[50, 100, 200, 400, 800], L=[10, 40, 80],
                C=[20, 50, 500, 5000], N=[1, 4, 16, 64]) + TARGET_SIZES),
    "targets": list(TARGET_SIZES),
    "large": _unique(
        _sweeps(Size(1000, 32, 100, 200), T=[250, 500, 1000, 2000, 4000], L=[50, 200, 400],
                C=[100, 1000, 10000], N=[8, 32, 128]) + TARGET_SIZES),
}


def _expect(ok: bool, name: str, expected: str, got) -> None:
    if not ok:
        raise ValueError(f"{name}: expected {expected}, got {got}")


def check_size(size: Size, where: str = "size") -> Size:
    for letter in "TNCL":
        v = getattr(size, letter)
        _expect(isinstance(v, (int, np.integer)) and not isinstance(v, bool), f"{where} {letter}",
                "an integer", repr(v))
    _expect(size.T >= 1 and size.N >= 1, where, "T >= 1 and N >= 1", size.label)
    _expect(size.L >= 0 and size.T >= size.L, where, "0 <= L <= T (every target must fit)",
            size.label)
    _expect(size.C >= (3 if size.L > 1 else 2), where,
            "C >= 3 (blank plus two labels, so targets need no adjacent repeats)", size.label)
    return size


def load_grid(grid: str) -> list[Size]:
    """A named grid (``small``, ``default``, ``targets``, ``large``) or a JSON/CSV file of
    T, N, C, L rows."""
    if grid in GRIDS:
        return list(GRIDS[grid])
    path = Path(grid)
    if not path.is_file():
        raise FileNotFoundError(f"grid: expected one of {', '.join(GRIDS)} or a JSON/CSV file, "
                                f"got {grid!r} (no such file)")
    text = read_text(path, f"grid {path}")
    if path.suffix.lower() == ".json":
        try:
            records = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"grid {path}: expected JSON, got a parse error ({exc})") from None
    else:
        records = [{(k or "").strip(): v for k, v in rec.items()}  # "T, N, C, L" headers too
                   for rec in csv.DictReader(text.splitlines())]
    _expect(isinstance(records, list) and len(records) > 0, f"grid {path}",
            "a non-empty list of {T, N, C, L} rows", type(records).__name__ if not isinstance(
                records, list) else "an empty list")
    sizes = []
    for i, rec in enumerate(records):
        where = f"grid {path} row {i + 1}"
        _expect(isinstance(rec, dict) and set("TNCL") <= set(rec), where,
                "fields T, N, C, L", rec)
        try:
            values = {k: int(str(rec[k]).strip()) for k in "TNCL"}
        except ValueError:
            raise ValueError(f"{where}: expected integers for T, N, C, L, got "
                             f"{ {k: rec[k] for k in 'TNCL'} }") from None
        sizes.append(check_size(Size(**values), where))
    return _unique(sizes)


def make_problem(size: Size, *, dtype: str = "float64", seed: int = 0) -> CTCProblem:
    """A random full-length problem of this size: logits N(0, 2^2), blank 0, every target
    exactly ``L`` labels with no adjacent repeats (so it fits in ``T >= L`` frames)."""
    check_size(size)
    _expect(dtype in DTYPES, "dtype", f"one of {', '.join(DTYPES)}", dtype)
    T, N, C, L = size.T, size.N, size.C, size.L
    rng = np.random.default_rng(seed)
    logits = (rng.normal(size=(T, N, C)) * 2.0).astype(dtype)  # (T, N, C)
    targets = np.empty((N, L), dtype=np.int64)  # (N, L)
    if L:
        targets[:, 0] = rng.integers(1, C, size=N)
        for l in range(1, L):  # a label other than blank and the previous one
            step = rng.integers(1, C - 1, size=N)
            targets[:, l] = (targets[:, l - 1] - 1 + step) % (C - 1) + 1
    return CTCProblem(logits, targets, np.full(N, T), np.full(N, L))


# -- threads -------------------------------------------------------------------------------
def set_threads(n: int) -> dict:
    """Use ``n`` threads in torch and in NumPy's BLAS; return what was done, for the sidecar.

    NumPy's element-wise ufuncs (all the reference uses) are single-threaded anyway. BLAS
    threads are limited through threadpoolctl when it is installed; otherwise the usual
    environment variables are set, which only reach libraries loaded after this call.
    ``CTCBENCH_THREADS`` is set too, so isolated backends' workers started later use ``n``.
    """
    _expect(isinstance(n, int) and n >= 1, "threads", "an integer >= 1", n)
    done = {"threads": n}
    # CTCBENCH_THREADS reaches the frameworks' own thread pools in worker processes (TF, JAX)
    for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", THREADS_ENV):
        os.environ[var] = str(n)
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        done["numpy_blas_threads"] = "environment variables (effective for libraries loaded later)"
    else:
        threadpool_limits(n)
        done["numpy_blas_threads"] = f"threadpoolctl limit {n}"
    try:
        import torch
    except ImportError:
        done["torch_threads"] = None
    else:
        torch.set_num_threads(n)
        done["torch_threads"] = torch.get_num_threads()
    return done


# -- memory --------------------------------------------------------------------------------
_PAGE = os.sysconf("SC_PAGE_SIZE") if hasattr(os, "sysconf") else 4096


def _rss_bytes() -> int | None:
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * _PAGE
    except OSError:
        return None


def _malloc_trim() -> None:
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_rss_delta(fn, *, interval: float = 0.0005) -> float | None:
    """Peak RSS growth in bytes while ``fn()`` runs (sampled); ``None`` without /proc."""
    _malloc_trim()
    start = _rss_bytes()
    if start is None:
        fn()
        return None
    peak = [start]
    stop = threading.Event()

    def sample():
        while not stop.is_set():
            rss = _rss_bytes()
            if rss > peak[0]:
                peak[0] = rss
            stop.wait(interval)

    old_switch = sys.getswitchinterval()
    sys.setswitchinterval(interval)  # let the sampler in between Python-level steps
    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        fn()
        peak[0] = max(peak[0], _rss_bytes())
    finally:
        stop.set()
        thread.join()
        sys.setswitchinterval(old_switch)
    return float(peak[0] - start)


# -- the run -------------------------------------------------------------------------------
MIN_MEASUREMENT_S = 0.05  # a measurement loops a small size until it takes about this long


def _timed(backend, problem, number: int) -> float:
    """Seconds per call, over ``number`` back-to-back calls."""
    t0 = time.perf_counter()
    for _ in range(number):
        backend.run(problem)
    return (time.perf_counter() - t0) / number


def _size_fields(size: Size) -> dict:
    return {"T": size.T, "N": size.N, "C": size.C, "L": size.L, "cells": size.cells}


def _failure(exc: Exception) -> dict:
    """Status and reason for a backend that failed: ``crashed`` / ``timeout`` for an isolated
    worker that died or hung (``BackendFailure.status``), else ``error``."""
    status = exc.status if isinstance(exc, BackendFailure) else "error"
    return {"status": status, "reason": f"{type(exc).__name__}: {exc}"}


def measure_size(backends: dict, size: Size, *, dtype: str, repeat: int, warmup: int = 1,
                 seed: int = 0, memory: bool = True) -> list[dict]:
    """One row per backend for one size; ``backends`` maps name -> backend or the
    ``(status, reason)`` it could not be created with. ``warmup`` untimed calls, one call
    that sets how many calls one measurement loops, then ``repeat`` measurements."""
    try:
        problem = make_problem(size, dtype=dtype, seed=seed)
    except MemoryError as exc:  # a size too large for this machine: say so, go on to the next
        problem, no_problem = None, ("error", f"MemoryError: the {size.label} logits do not fit "
                                              f"in memory ({exc})")
    rows, ready, warm = {}, {}, {}
    for name, backend in backends.items():
        base = {"backend": name, **_size_fields(size), "dtype": dtype, "repeat": repeat}
        if problem is None and not isinstance(backend, tuple):
            backend = no_problem
        if isinstance(backend, tuple):
            rows[name] = {**base, "status": backend[0], "reason": backend[1]}
            continue
        try:
            for _ in range(warmup):
                backend.run(problem)
            warm[name] = _timed(backend, problem, 1)  # calibration, after the warm-up
        except UnsupportedProblem as exc:
            rows[name] = {**base, "status": "unsupported", "reason": str(exc)}
            continue
        except Exception as exc:  # a failing backend must not stop the others
            rows[name] = {**base, **_failure(exc)}
            continue
        rows[name], ready[name] = {**base, "status": "ok", "reason": None}, backend

    # calls per measurement: a fast backend at a small size is looped to ~MIN_MEASUREMENT_S
    number = {name: int(np.clip(np.ceil(MIN_MEASUREMENT_S / max(w, 1e-6)), 1, 100))
              for name, w in warm.items()}
    times = {name: [] for name in ready}
    for _ in range(repeat):  # interleaved: every backend once per repeat
        for name, backend in list(ready.items()):
            try:
                times[name].append(_timed(backend, problem, number[name]))
            except Exception as exc:  # a crash in a later call must not stop the others
                rows[name].update(_failure(exc))
                del ready[name], times[name]

    ref = np.array(times[REFERENCE]) if REFERENCE in times else None
    for name, ts in times.items():
        ts = np.array(ts)
        row = rows[name]
        q25, median, q75 = np.percentile(ts, [25, 50, 75])
        row.update(calls_per_measurement=number[name], times_s=ts.tolist(),
                   time_median_s=median, time_min_s=ts.min(), time_max_s=ts.max(),
                   time_iqr_s=q75 - q25, ns_per_cell=median / size.cells * 1e9)
        if ref is not None:
            pair = ts / ref  # ratio within each repeat, same machine state
            r25, r50, r75 = np.percentile(pair, [25, 50, 75])
            row.update(ratio_to_torch=float(r50), ratio_min=float(pair.min()),
                       ratio_q25=float(r25), ratio_q75=float(r75), ratio_max=float(pair.max()))
        if memory:
            try:
                peak = peak_rss_delta(lambda: ready[name].run(problem))
            except Exception as exc:
                row.update(_failure(exc))
                continue
            row["peak_rss_mb"] = None if peak is None else peak / 2**20
    return [rows[name] for name in backends]


def resolve_backends(names=()) -> dict:
    """name -> backend instance, or ``(status, reason)`` for one that cannot run here.

    No names: every registered backend. ``torch`` is always added as the reference."""
    names = list(dict.fromkeys(names or backend_names()))
    known = set(backend_names())
    unknown = [n for n in names if n not in known]
    _expect(not unknown, "backend", f"one of {', '.join(sorted(known))}", ", ".join(unknown))
    if REFERENCE not in names:
        names.append(REFERENCE)
    out = {}
    for name in names:
        try:
            out[name] = get_backend(name)
        except BackendUnavailable as exc:
            out[name] = ("skipped", str(exc))
        except Exception as exc:  # a broken plugin must not hide the others
            out[name] = ("skipped", f"failed to load: {type(exc).__name__}: {exc}")
    return out


KEY = ("backend", "T", "N", "C", "L", "dtype")
FAILED = ("error", "crashed", "timeout")


@dataclass
class BenchRun:
    run_dir: Path
    rows: list[dict]
    resumed: int  # sizes found done in the run folder and not measured again


def run_bench(*, backends=(), grid: str = "default", repeat: int = 5, threads: int = 1,
              dtype: str = "float64", out=None, warmup: int = 1, seed: int = 0,
              progress: bool = True) -> BenchRun:
    """Measure every backend at every size of ``grid``; rows go to ``rows.jsonl`` in the run
    folder as each size finishes, so a run given the same ``out`` resumes where it stopped."""
    _expect(isinstance(repeat, int) and repeat >= 1, "repeat", "an integer >= 1", repeat)
    _expect(dtype in DTYPES, "dtype", f"one of {', '.join(DTYPES)}", dtype)
    sizes = load_grid(grid)
    thread_info = set_threads(threads)
    resolved = resolve_backends(backends)
    run_dir = new_run_dir("bench", out)
    log = RowLog(run_dir / "rows.jsonl")
    _expect(all(set(KEY) <= set(r) for r in log.rows()), "--out",
            "a new folder or one of an earlier bench run", f"{str(out)!r}, whose rows.jsonl "
            "holds rows of another kind (a compare or convergence run?)")
    # a failed row (error, crashed, timeout) may be transient, and one of another --repeat is
    # not this measurement: a resumed run measures both again
    done = {tuple(r.get(k) for k in KEY) for r in log.rows()
            if r.get("status") not in FAILED and r.get("repeat") == repeat}
    config = {"grid": grid, "sizes": [asdict(s) for s in sizes], "backends": list(resolved),
              "repeat": repeat, "warmup": warmup, "dtype": dtype, "seed": seed,
              "reference": REFERENCE, **thread_info}
    write_meta(run_dir, config)

    todo = [s for s in sizes
            if any((name, s.T, s.N, s.C, s.L, dtype) not in done for name in resolved)]
    from ctcbench.progress import Progress
    with Progress("bench", total=len(todo), unit="sizes", enabled=progress) as bar:
        for size in todo:
            bar.note(size.label)
            for row in measure_size(resolved, size, dtype=dtype, repeat=repeat, warmup=warmup,
                                    seed=seed):
                log.append(row)
            bar.update()
    wanted = {(name, s.T, s.N, s.C, s.L, dtype) for s in sizes for name in resolved}
    latest = {}
    for row in log.rows():
        key = tuple(row.get(k) for k in KEY)
        if key in wanted:
            latest[key] = row
    rows = sorted(latest.values(), key=lambda r: (r["cells"], r["T"], r["N"], r["C"], r["L"],
                                                  r["backend"]))
    return BenchRun(run_dir, rows, len(sizes) - len(todo))


# -- report --------------------------------------------------------------------------------
@dataclass
class BenchReport:
    run_dir: Path
    rows: list[dict]
    regressions: list[str]  # one message per --fail-on limit exceeded
    files: list[Path]
    resumed: int


def bench(*, backends=(), grid: str = "default", repeat: int = 5, threads: int = 1,
          dtype: str = "float64", out=None, baseline=None, fail_on=(),
          progress: bool = True) -> BenchReport:
    """Run the bench, compare with ``baseline`` if given, export tables and plots."""
    from ctcbench.bench.baseline import compare, load_rows, parse_fail_on
    from ctcbench.bench.plots import bench_plots
    from ctcbench.runstore import to_json

    rules = [parse_fail_on(spec) for spec in fail_on]  # bad options fail before any timing
    _expect(baseline is not None or not rules, "fail-on", "a --baseline to compare with",
            "no baseline")
    old = load_rows(baseline) if baseline is not None else None
    run = run_bench(backends=backends, grid=grid, repeat=repeat, threads=threads, dtype=dtype,
                    out=out, progress=progress)
    regressions = compare(run.rows, old, rules) if old is not None else []
    import pandas as pd
    pd.DataFrame(run.rows).to_csv(run.run_dir / "bench.csv", index=False)
    (run.run_dir / "bench.json").write_text(to_json(run.rows, indent=1) + "\n")
    files = [run.run_dir / "bench.csv", run.run_dir / "bench.json",
             *bench_plots(run.rows, run.run_dir)]
    from ctcbench.report import write_report
    files.append(write_report([run.run_dir]))  # report.html: the run folder as one page
    return BenchReport(run.run_dir, run.rows, regressions, files, run.resumed)


def _ms(x) -> str:
    if x is None:
        return ""
    ms = x * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def format_table(rows: list[dict]) -> str:
    """A fixed-width table for people: one line per backend and size; backends skipped
    everywhere (cannot run here) are listed once below it."""
    skipped = {r["backend"]: r.get("reason") for r in rows if r.get("status") == "skipped"}
    rows = [r for r in rows if r.get("status") != "skipped"]
    has_base = any("change_time" in r for r in rows)
    head = ["backend", "T", "N", "C", "L", "cells", "median ms", "min-max ms", "ns/cell",
            "x torch [min-max]", "peak MiB"] + (["vs baseline"] if has_base else []) + ["status"]
    lines = []
    for r in rows:
        ok = r.get("status") == "ok"
        ratio = "" if r.get("ratio_to_torch") is None else (
            f"{r['ratio_to_torch']:.2f} [{r['ratio_min']:.2f}-{r['ratio_max']:.2f}]")
        peak = r.get("peak_rss_mb")
        line = [r["backend"], r["T"], r["N"], r["C"], r["L"], r["cells"],
                _ms(r.get("time_median_s")) if ok else "",
                f"{_ms(r['time_min_s'])}-{_ms(r['time_max_s'])}" if ok else "",
                f"{r['ns_per_cell']:.0f}" if ok else "", ratio,
                "" if peak is None else f"{peak:.1f}"]
        if has_base:
            line.append(f"{r['change_time']:+.0%} time" if "change_time" in r else "")
        line.append("ok" if ok else f"{r['status']}: {r.get('reason')}")
        lines.append([str(x) for x in line])
    widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h)
              for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 or i == len(cells) - 1 else c.rjust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    notes = [f"skipped {name}: {reason}" for name, reason in skipped.items()]
    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *map(fmt, lines), *notes])
