"""Time versions of the numba kernel against each other: the profiling loop behind docs/numba.md.

Not a test: a benchmark script. Each version is a copy of ``backends/numba/kernels.py`` (for
instance an earlier commit's; since the split of 2026-12-01 it imports the rows and the rescue
from the installed ``rows`` and ``rescue``, so to compare versions of those, time
two checkouts); it is compiled afresh, into a temporary numba cache folder, and called
on preallocated outputs, so only the kernel is timed (no adapter, no allocation).

    git show HEAD~1:backends/numba/kernels.py > /tmp/before.py
    python benchmarks/numba_kernel.py /tmp/before.py backends/numba/kernels.py --rounds 2
    python benchmarks/numba_kernel.py backends/numba/kernels.py --threads 1,2 --repeat 11
    python benchmarks/numba_kernel.py backends/numba/kernels.py --dtype float32 \
        --compute float64,float32   # float64 against float32 compute, float32 logits
    python benchmarks/numba_kernel.py backends/numba/kernels.py --logits peaked --repeat 5 \
        --rounds 2 --size 500,16,100,200 --size 8000,4,100,200 --size 40000,1,100,200
        # a T sweep: best of 10 a size (best of 3 is too few on a shared machine)

First the CPU (``ctcbench.environment.cpu_line``): figures hold for that CPU only. Then per
version and size: process CPU time per call (best and median of ``--repeat``, one thread:
less sensitive to other processes than wall time) and ns per DP cell (time / (T N (2L + 1)));
versions take turns (``--order calls``: sizes too, call by call); with more than one size,
each version's slowest size against its fastest (the T sweeps' flatness); with
``--threads 1,2`` also the wall time per thread count, the counts alternating call by
call, and the median of the per-call speed-up over one thread.
Random targets and logits (seed 0; ``--logits peaked`` for a trained model's), every sample T
frames and L labels. Samples per path, by ``kernels``' codes: FAST, BLOCKED, LOG_SPACE,
FAST64.
"""
from __future__ import annotations

import argparse
import functools
import os
import tempfile
import time
from pathlib import Path

import numpy as np

from ctcbench.environment import cpu_description, cpu_line
from ctcbench.progress import Progress

SIZES = ["1000,32,100,200", "200,16,50,40", "50,8,20,10", "1000,8,5000,100"]


@functools.cache
def load_module(path: str) -> dict:
    """The namespace of the kernel module file at ``path``, whose kernels compile afresh
    (``main`` points numba's cache at a new temporary folder)."""
    namespace = {"__name__": f"kernel_{Path(path).stem}"}
    exec(compile(Path(path).read_text(), path, "exec"), namespace)
    return namespace


def load_kernel(path: str, compute: str = "float64"):
    """The kernel of ``path`` for the ``compute`` dtype, as a function of ``(call, threads)``
    that runs it as the adapter does: ``backend.launch`` (a serial kernel, given the
    samples), or for a ``prange`` kernel (before 2026-12-03, no ``samples`` argument)
    numba's threads."""
    import numba

    from ctcbench.backends.numba.backend import launch

    namespace = load_module(path)
    kernel = namespace["ctc_batch"]
    kernels = namespace.get("KERNELS")  # since 2026-12-03 the float32 compute's is its own
    if kernels is not None and compute == "float32":  # keyed (compute, gradient) since 12-06
        kernel = kernels.get(("float32", "float32")) or kernels["float32"]
    if kernel.py_func.__code__.co_argcount == 9:
        def run_prange(call, threads):
            numba.set_num_threads(threads)
            kernel(*call)
        return run_prange
    return lambda call, threads: launch(kernel, call[:6], *call[6:], threads)


def problem(T: int, N: int, C: int, L: int, dtype: str = "float64",
            compute: str = "float64", logits_kind: str = "random") -> tuple:
    """The kernel's arguments and outputs for a problem of these sizes: logits of ``dtype``
    (``random``: N(0, 1); ``peaked``: shaped like a trained model's, each frame favouring the
    label a linear alignment is at, blanks between labels), the gradient of ``compute``."""
    rng = np.random.default_rng(0)
    logits = rng.standard_normal((T, N, C))  # (T, N, C)
    targets = rng.integers(1, C, (N, L)).astype(np.int64)  # (N, L)
    if logits_kind == "peaked":
        pos, period = np.arange(T) * L // T, max(1, T // L)
        for n in range(N):
            logits[np.arange(T), n, targets[n, pos]] += 4
            logits[np.arange(T) % period >= period // 2, n, 0] += 5
    logits = logits.astype(dtype)
    return (logits, targets, np.full(N, T, np.int64), np.full(N, L, np.int64), np.int64(0),
            np.ones(N), np.empty(N), np.empty((T, N, C), dtype=compute),
            np.zeros(N, np.int8))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("versions", nargs="+", help="kernel module files")
    parser.add_argument("--size", action="append", help="T,N,C,L (repeatable; default: the "
                        "four sizes of the `targets` grid)")
    parser.add_argument("--repeat", type=int, default=7, help="calls per version and round")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--threads", default="1", help="1, or 1,2 for the thread speed-up")
    parser.add_argument("--dtype", default="float64", help="logits dtype (float64, float32)")
    parser.add_argument("--compute", default="float64", help="the gradient's dtype, which "
                        "is the compute asked for: float64, float32, or both (float64,float32)")
    parser.add_argument("--logits", choices=["random", "peaked"], default="random")
    parser.add_argument("--order", choices=["sizes", "calls"], default="sizes", help="sizes: "
                        "each size's calls together (a batch that fits the caches stays in "
                        "them from call to call); calls: every size and version in turn, call "
                        "by call (each call finds the others' data in the caches, and a burst "
                        "of load hits every size alike)")
    parser.add_argument("--flush-subnormals", action="store_true", help="set the calling "
                        "thread's flush-to-zero bits before timing, so that versions older "
                        "than step 14 (docs/numba.md) run without subnormals too (one thread, "
                        "serial kernels only: a prange kernel runs in numba's threads)")
    parser.add_argument("--chunksize", type=int, default=1, help="numba's parallel chunk size "
                        "for a prange kernel (1: samples one at a time, as its adapter ran it)")
    args = parser.parse_args()
    print(cpu_line(cpu_description()), flush=True)  # figures hold for this CPU only
    os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    # Functions the versions import (primitives) compiled from these exec'd modules must not
    # go into the project's disk cache: numba could not load those entries back.
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="numba-kernel-bench-")
    import numba

    numba.set_parallel_chunksize(args.chunksize)
    if args.flush_subnormals:
        from ctcbench.backends.numba.primitives import (FLUSH_SUBNORMALS, fp_control,
                                                  restore_fp_control)
        restore_fp_control(fp_control() | FLUSH_SUBNORMALS)
    threads = [int(x) for x in args.threads.split(",")]
    kernels = {(path, compute): load_kernel(path, compute) for path in args.versions
               for compute in args.compute.split(",")}
    sizes = [tuple(int(x) for x in size.split(",")) for size in args.size or SIZES]
    calls = {}  # (size, key) -> the kernel's arguments and outputs
    best = {}  # (size, key) -> best CPU seconds over every round

    def prepare(job):
        calls[job] = problem(*job[0], args.dtype, job[1][1], args.logits)
        kernels[job[1]](calls[job], 1)  # compile, warm up

    def time_calls(job, count, cpu, wall):
        """``count`` calls of ``job`` per thread count, appended to ``cpu`` and ``wall``."""
        for _ in range(count):
            for n in threads:
                c0, w0 = time.process_time(), time.perf_counter()
                kernels[job[1]](calls[job], n)
                wall[n].append(time.perf_counter() - w0)
                if n == 1:
                    cpu.append(time.process_time() - c0)

    def report(job, cpu, wall):
        (T, N, C, L), (path, compute) = job
        cells = T * N * (2 * L + 1)
        best[job] = min(best.get(job, np.inf), min(cpu))
        line = (f"{Path(path).name:20} {compute} T={T} N={N} C={C} L={L}: cpu best "
                f"{min(cpu) * 1e3:.2f} ms ({min(cpu) / cells * 1e9:.2f} ns/cell), "
                f"median {np.median(cpu) * 1e3:.2f} ms; samples per path "
                f"{np.bincount(calls[job][-1], minlength=4).tolist()}")
        for n in threads[1:]:
            speedup = np.median(np.array(wall[1]) / np.array(wall[n]))
            line += (f"; {n} threads: wall {np.median(wall[n]) * 1e3:.2f} ms vs "
                     f"{np.median(wall[1]) * 1e3:.2f}, speed-up {speedup:.2f}x")
        print(line, flush=True)

    if args.order == "sizes":  # a size's calls together, the versions taking turns
        for size in sizes:
            for key in kernels:
                prepare((size, key))
            for _ in range(args.rounds):
                for key in kernels:
                    cpu, wall = [], {n: [] for n in threads}
                    time_calls((size, key), args.repeat, cpu, wall)
                    report((size, key), cpu, wall)
            for key in kernels:
                del calls[size, key]
    else:  # every size and version in turn, call by call
        jobs = [(size, key) for size in sizes for key in kernels]
        for job in jobs:
            prepare(job)
        for r in range(args.rounds):
            cpu = {job: [] for job in jobs}
            wall = {job: {n: [] for n in threads} for job in jobs}
            with Progress(f"round {r + 1}/{args.rounds}", args.repeat, "calls of each",
                          leave=False) as progress:
                for _ in range(args.repeat):
                    for job in jobs:
                        time_calls(job, 1, cpu[job], wall[job])
                    progress.update()
            for job in jobs:
                report(job, cpu[job], wall[job])
    if len(sizes) > 1:
        for key in kernels:
            print(flatness(key, {size: best[size, key] for size in sizes}))


def flatness(key: tuple, seconds: dict) -> str:
    """One line: the version's fastest and slowest size per DP cell, and their ratio (the
    T sweeps' 'flat within', docs/numba.md); ``seconds``: (T, N, C, L) -> best CPU time."""
    per_cell = {size: t / (size[0] * size[1] * (2 * size[3] + 1)) * 1e9
                for size, t in seconds.items()}
    lo, hi = min(per_cell, key=per_cell.get), max(per_cell, key=per_cell.get)

    def named(size):
        return f"{per_cell[size]:.2f} ns/cell at T={size[0]} N={size[1]}"
    return (f"{Path(key[0]).name} {key[1]}: best over the rounds from {named(lo)} to "
            f"{named(hi)}: the slowest {per_cell[hi] / per_cell[lo]:.2f}x the fastest")


if __name__ == "__main__":
    main()
