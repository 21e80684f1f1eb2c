"""Speed and peak memory of every backend's forward+backward over a grid of sizes.

What is timed (the kernel time, ``time_median_s``): the same work for every backend,
log_softmax of the logits, the CTC forward and backward and the gradient w.r.t. the logits.
For a framework adapter with a ``kernel`` (optax, tf): the framework's own function on its own
tensors, built once per problem; otherwise the adapter's ``run`` on the exact shape. It is
timed where it runs: in this process, or inside an isolated backend's worker process (the
worker's ``bench`` request). The first call (``first_call_s``), one whole ``run`` with its
conversions (``run_s``) and the round trip to a worker (``roundtrip_s``) are columns of their
own, never in the kernel time. Repeats are interleaved across backends, so load on a shared
machine hits all of them alike, and each ratio to ``torch`` is taken pair by pair within one
repeat.

Peak memory: one extra, untimed call per backend and size (the sampler thread would slow a
timed call), the RSS (``/proc/self/statm``) sampled every 0.5 ms, minus the RSS just before the
call after ``malloc_trim``. It misses peaks shorter than the sampling interval and memory the
allocator still held from an earlier call. Details: docs/bench.md.
"""
from __future__ import annotations

import contextlib
import ctypes
import os
import sys
import threading
import time

import numpy as np

from ctcbench.runtime.protocol import (BackendFailure, BackendUnavailable, UnsupportedProblem,
                                       as_result, kernel_call)
from ctcbench.runtime.registry import backend_names, check_backend_names, get_backend
from ctcbench.runtime.sizes import Size, make_problem
from ctcbench.runtime.status import Status
from ctcbench.runtime.threads import LIBRARY_ENVS, THREADS_ENV, use_threads
from ctcbench.runtime.timing import CallTimes, between_calls, time_calls, timed

BASELINE = "torch"  # the speed baseline: every ratio is to it, measured in the same run


# -- threads -------------------------------------------------------------------------------
def set_threads(n: int) -> dict:
    """Use ``n`` threads in torch and in NumPy's BLAS; return what was done, for the sidecar.

    NumPy's element-wise ufuncs (all the reference uses) are single-threaded anyway. BLAS
    threads are limited through threadpoolctl when it is installed; otherwise the usual
    environment variables are set, which only reach libraries loaded after this call.
    ``CTCBENCH_THREADS`` is set too, so isolated backends' workers started later use ``n``.
    """
    # CTCBENCH_THREADS reaches the frameworks' own thread pools in worker processes (TF, JAX)
    n = use_threads(n)
    done = {"threads": n}
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


@contextlib.contextmanager
def threads_within(n: int):
    """:func:`set_threads` ``(n)`` for the ``with`` block only: the thread variables and torch's
    count are as they were after it (a worker started inside is restarted on its next call
    outside, as its count differs)."""
    saved = {var: os.environ.get(var) for var in (*LIBRARY_ENVS, THREADS_ENV)}
    torch = sys.modules.get("torch")
    torch_threads = torch.get_num_threads() if torch is not None else None
    try:
        yield set_threads(n)
    finally:
        for var, value in saved.items():
            if value is None:
                os.environ.pop(var, None)
            else:
                os.environ[var] = value
        if torch_threads is not None:
            torch.set_num_threads(torch_threads)


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
class _Timer:
    """Times one backend on one problem where the backend runs: in this process, or inside
    its worker process (``IsolatedBackend.bench``), so the round trip to a worker never
    enters the times. What is timed is :func:`ctcbench.runtime.protocol.kernel_call`: the backend's
    ``kernel`` where it has one, else ``run`` on the exact shape (no compilation buckets)."""

    def __init__(self, backend, problem, between: str = "nothing"):
        self.worker, self.problem, self.mode = backend.worker, problem, between
        self.between = between_calls(between, problem.logits.nbytes)  # None: back to back
        self.run = lambda: backend.impl.run(
            problem, **({"exact_shape": True} if backend.traits.takes_exact_shape else {}))
        self.call = None if self.worker is not None else kernel_call(backend.impl, problem,
                                                                     backend.traits)

    def start(self, warmup: int) -> CallTimes:
        """Warm-up (the first call timed apart) and the calls-per-measurement calibration."""
        if self.worker is not None:
            return self.worker.bench(self.problem, warmup=warmup, repeat=0,
                                     between=self.mode)
        return time_calls(self.call, warmup=warmup, repeat=0, between=self.between)

    def measure(self, number: int) -> float:
        """Seconds per call over ``number`` calls (back to back, or a model step between)."""
        if self.worker is not None:
            return self.worker.bench(None, repeat=1, number=number, between=self.mode).times_s[0]
        return timed(self.call, number, self.between)

    def roundtrip(self) -> tuple[float | None, float, list[str]]:
        """One ``run`` as a driver makes it: the seconds beyond the call itself for a worker
        (sending the problem, the pipe, the reply; ``None`` in-process), the seconds of the
        adapter's whole ``run`` (conversions in and out included), and the result's notes
        (what the backend really did, e.g. the shape it compiled for)."""
        if self.worker is None:
            t0 = time.perf_counter()
            result = self.run()
            return None, time.perf_counter() - t0, as_result(result, self.problem).notes
        result, wall_s, run_s = self.worker.run_timed(self.problem, exact_shape=True)
        return max(wall_s - run_s, 0.0), run_s, result.notes


def _size_fields(size: Size) -> dict:
    return {"T": size.T, "N": size.N, "C": size.C, "L": size.L, "cells": size.cells}


def _failure(exc: Exception) -> dict:
    """Status and reason for a backend that failed: ``crashed`` / ``timeout`` for an isolated
    worker that died or hung (``BackendFailure.status``), else ``error``."""
    status = exc.status if isinstance(exc, BackendFailure) else Status.ERROR
    return {"status": status, "reason": f"{type(exc).__name__}: {exc}"}


def measure_size(backends: dict, size: Size, *, dtype: str, repeat: int, warmup: int = 1,
                 seed: int = 0, memory: bool = True, threads: int = 1,
                 between: str = "nothing") -> list[dict]:
    """One row per backend for one size; ``backends`` maps name -> loaded backend
    (``get_backend``) or the ``(status, reason)`` it could not be created with. ``warmup``
    calls (the first one is ``first_call_s``), one call that sets how many calls one
    measurement loops, then ``repeat`` measurements, interleaved across backends. Every
    call is timed where the backend runs (see :class:`_Timer`), after ``between``
    (``timing.BETWEEN_CALLS``) outside the clock; ``threads`` and ``between`` are recorded."""
    try:
        problem = make_problem(size, dtype=dtype, seed=seed)
    except MemoryError as exc:  # a size too large for this machine: say so, go on to the next
        problem, no_problem = None, (Status.ERROR, f"MemoryError: the {size.label} logits do "
                                                   f"not fit in memory ({exc})")
    rows, ready, number = {}, {}, {}
    for name, backend in backends.items():
        base = {"backend": name, "threads": threads, **_size_fields(size), "dtype": dtype,
                "repeat": repeat, "between_calls": between}
        if problem is None and not isinstance(backend, tuple):
            backend = no_problem
        if isinstance(backend, tuple):
            rows[name] = {**base, "status": backend[0], "reason": backend[1]}
            continue
        timer = _Timer(backend, problem, between)
        try:
            start = timer.start(warmup)
        except UnsupportedProblem as exc:
            rows[name] = {**base, "status": Status.UNSUPPORTED, "reason": str(exc)}
            continue
        except Exception as exc:  # a failing backend must not stop the others
            rows[name] = {**base, **_failure(exc)}
            continue
        rows[name] = {**base, "status": Status.OK, "reason": None,
                      "first_call_s": start.first_call_s}
        ready[name], number[name] = timer, start.number

    times = {name: [] for name in ready}
    for _ in range(repeat):  # interleaved: every backend once per repeat
        for name, timer in list(ready.items()):
            try:
                times[name].append(timer.measure(number[name]))
            except Exception as exc:  # a crash in a later call must not stop the others
                rows[name].update(_failure(exc))
                del ready[name], times[name]

    ref = np.array(times[BASELINE]) if BASELINE in times else None
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
        # one more call as a driver makes it, timed (the round trip, the whole run), and one
        # more for the peak memory: the RSS sampler thread would slow a timed call
        try:
            row["roundtrip_s"], row["run_s"], row["notes"] = ready[name].roundtrip()
            if memory:
                peak = peak_rss_delta(ready[name].roundtrip)
                row["peak_rss_mb"] = None if peak is None else peak / 2**20
        except Exception as exc:
            row.update(_failure(exc))
    return [rows[name] for name in backends]


def resolve_backends(names=()) -> dict:
    """name -> backend instance, or ``(status, reason)`` for one that cannot run here.

    No names: every registered backend. ``torch`` is always added as the reference."""
    names = list(dict.fromkeys(names or backend_names()))
    check_backend_names(names)
    if BASELINE not in names:
        names.append(BASELINE)
    out = {}
    for name in names:
        try:
            out[name] = get_backend(name)
        except BackendUnavailable as exc:
            out[name] = (Status.SKIPPED, str(exc))
        except Exception as exc:  # a broken plugin must not hide the others
            out[name] = (Status.SKIPPED, f"failed to load: {type(exc).__name__}: {exc}")
    return out
