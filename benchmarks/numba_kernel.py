"""Time versions of the numba kernel against each other: the profiling loop behind docs/numba.md.

Not a test: a benchmark script. Each version is a copy of ``backends/numba_kernels.py`` (for
instance an earlier commit's; since the split of 2026-12-01 it imports the rows and the rescue
from the installed ``numba_rows`` and ``numba_rescue``, so to compare versions of those, time
two checkouts); it is compiled afresh, into a temporary numba cache folder, and called
on preallocated outputs, so only the kernel is timed (no adapter, no allocation).
Versions alternate within each round, so load on a shared machine hits them alike.

    git show HEAD~1:backends/numba_kernels.py > /tmp/before.py
    python benchmarks/numba_kernel.py /tmp/before.py backends/numba_kernels.py --rounds 2
    python benchmarks/numba_kernel.py backends/numba_kernels.py --threads 1,2 --repeat 11
    python benchmarks/numba_kernel.py backends/numba_kernels.py --dtype float32 \
        --compute float64,float32   # float64 against float32 compute, float32 logits

First the CPU (``ctcbench.environment.cpu_line``): figures hold for that CPU only. Then per
version and size: process CPU time per call (best and median of ``--repeat``, one thread:
less sensitive to other processes than wall time) and ns per DP cell (time / (T N (2L + 1)));
with ``--threads 1,2`` also the wall time per thread count, the counts alternating call by
call, and the median of the per-call speed-up over one thread.
Random targets and logits (seed 0; ``--logits peaked`` for a trained model's), every sample T
frames and L labels. Samples per path, by ``numba_kernels``' codes: FAST, BLOCKED, LOG_SPACE,
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
    that runs it as the adapter does: ``numba_ctc.launch`` (a serial kernel, given the
    samples), or for a ``prange`` kernel (before 2026-12-03, no ``samples`` argument)
    numba's threads."""
    import numba

    from ctcbench.backends.numba_ctc import launch

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
    parser.add_argument("--flush-subnormals", action="store_true", help="set the calling "
                        "thread's flush-to-zero bits before timing, so that versions older "
                        "than step 14 (docs/numba.md) run without subnormals too (one thread, "
                        "serial kernels only: a prange kernel runs in numba's threads)")
    parser.add_argument("--chunksize", type=int, default=1, help="numba's parallel chunk size "
                        "for a prange kernel (1: samples one at a time, as its adapter ran it)")
    args = parser.parse_args()
    print(cpu_line(cpu_description()), flush=True)  # figures hold for this CPU only
    os.environ.setdefault("NUMBA_THREADING_LAYER", "workqueue")
    # Functions the versions import (numba_math) compiled from these exec'd modules must not
    # go into the project's disk cache: numba could not load those entries back.
    os.environ["NUMBA_CACHE_DIR"] = tempfile.mkdtemp(prefix="numba-kernel-bench-")
    import numba

    numba.set_parallel_chunksize(args.chunksize)
    if args.flush_subnormals:
        from ctcbench.backends.numba_math import (FLUSH_SUBNORMALS, fp_control,
                                                  restore_fp_control)
        restore_fp_control(fp_control() | FLUSH_SUBNORMALS)
    threads = [int(x) for x in args.threads.split(",")]
    kernels = {(path, compute): load_kernel(path, compute) for path in args.versions
               for compute in args.compute.split(",")}
    for size in args.size or SIZES:
        T, N, C, L = (int(x) for x in size.split(","))
        cells = T * N * (2 * L + 1)
        calls = {key: problem(T, N, C, L, args.dtype, key[1], args.logits) for key in kernels}
        for _ in range(args.rounds):
            for key, kernel in kernels.items():
                call = calls[key]
                kernel(call, 1)  # compile, warm up
                cpu, wall = [], {n: [] for n in threads}
                for _ in range(args.repeat):
                    for n in threads:
                        c0, w0 = time.process_time(), time.perf_counter()
                        kernel(call, n)
                        wall[n].append(time.perf_counter() - w0)
                        if n == 1:
                            cpu.append(time.process_time() - c0)
                line = (f"{Path(key[0]).name:20} {key[1]} T={T} N={N} C={C} L={L}: cpu best "
                        f"{min(cpu) * 1e3:.2f} ms ({min(cpu) / cells * 1e9:.2f} ns/cell), "
                        f"median {np.median(cpu) * 1e3:.2f} ms; samples per path "
                        f"{np.bincount(call[-1], minlength=4).tolist()}")
                for n in threads[1:]:
                    speedup = np.median(np.array(wall[1]) / np.array(wall[n]))
                    line += (f"; {n} threads: wall {np.median(wall[n]) * 1e3:.2f} ms vs "
                             f"{np.median(wall[1]) * 1e3:.2f}, speed-up {speedup:.2f}x")
                print(line, flush=True)


if __name__ == "__main__":
    main()
