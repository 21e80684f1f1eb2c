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

import ctypes
import os
import sys
import threading
import time

import numpy as np

from ctcbench.bench.sizes import Size, expect, make_problem
from ctcbench.registry import (BackendFailure, BackendUnavailable, UnsupportedProblem, backend_names,
                               get_backend)
from ctcbench.worker import THREADS_ENV

REFERENCE = "torch"  # every ratio is to this backend, measured in the same run


# -- threads -------------------------------------------------------------------------------
def set_threads(n: int) -> dict:
    """Use ``n`` threads in torch and in NumPy's BLAS; return what was done, for the sidecar.

    NumPy's element-wise ufuncs (all the reference uses) are single-threaded anyway. BLAS
    threads are limited through threadpoolctl when it is installed; otherwise the usual
    environment variables are set, which only reach libraries loaded after this call.
    ``CTCBENCH_THREADS`` is set too, so isolated backends' workers started later use ``n``.
    """
    expect(isinstance(n, int) and n >= 1, "threads", "an integer >= 1", n)
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


# -- measuring ---------------------------------------------------------------------------
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
    expect(not unknown, "backend", f"one of {', '.join(sorted(known))}", ", ".join(unknown))
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
