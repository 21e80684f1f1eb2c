"""The numba backend inside a training-like loop: each call after torch's, not back to back.

Not a test: a benchmark script (docs/numba.md, "Fresh memory"). A training step calls the
loss between a model's forward and backward passes, which allocate and free memory the size
of the logits several times over; a kernel timed back to back never sees that. Per size and
thread count this times, interleaved call by call, in one process:

- ``torch``: ``log_softmax`` + ``F.ctc_loss`` + ``backward`` on the CPU in float64, one call;
- ``numba`` back to back (``b2b``: the timed call right after an untimed one of its own), and
  each call right after a torch call (``alt``);
- each of those with the gradient array reused once let go (the adapter's default,
  ``backends/numba/reuse.py``) and with a fresh ``np.empty`` per call (``fresh``, as before);
- ``touch``: a fresh ``(T, N, C)`` float64 array allocated and written, alone: the price of
  fresh memory in each pattern;
- at two threads or more, ``reuse idle``: a torch call, 20 ms idle, then numba: whether torch's threads, still spinning, slow the call right after.

Wall time, median of ``--repeat`` calls per cell and round; the figures a round prints are
numba's ms, its ratio to torch's median in that round, and alt / b2b. The loss and gradient
of the last calls are compared with torch's (float64: an independent implementation).

    python benchmarks/numba_workload.py                     # C=5000 and the target size
    python benchmarks/numba_workload.py --size 1000,8,5000,100 --threads 1,2 --rounds 3
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from ctcbench.environment import cpu_description, cpu_line

SIZES = ["1000,8,5000,100", "1000,32,100,200"]


class FreshEveryCall:
    """The gradient allocation before reuse: a new array per call."""

    def empty(self, shape, dtype):
        return np.empty(shape, dtype)

    def release(self, shape=None, dtype=None):
        pass


def setup(T, N, C, L, seed=0):
    """Logits N(0, 2^2) (the blocked rescue takes these at C=5000), random targets."""
    import torch

    from ctcbench.core.problem import CTCProblem

    rng = np.random.default_rng(seed)
    logits = rng.normal(0.0, 2.0, (T, N, C))  # (T, N, C)
    targets = rng.integers(1, C, (N, L))  # (N, L)
    problem = CTCProblem(logits, targets, np.full(N, T), np.full(N, L), blank=0)
    x = torch.tensor(logits, requires_grad=True)
    args = (torch.tensor(targets), torch.full((N,), T), torch.full((N,), L))

    def torch_call():
        x.grad = None
        loss = torch.nn.functional.ctc_loss(torch.log_softmax(x, -1), *args, reduction="none")
        loss.sum().backward()
        return loss.detach().numpy(), x.grad.numpy()
    return problem, torch_call


def numba_calls(problem, threads: int):
    """``{"reuse": call, "fresh": call}``: the adapter's ``kernel`` on ``threads`` threads,
    reusing let-go gradients or not."""
    from ctcbench.backends.numba.backend import NumbaBackend

    os.environ["CTCBENCH_THREADS"] = str(threads)
    calls = {}
    for mode in ("reuse", "fresh"):
        backend = NumbaBackend()
        if mode == "fresh":
            backend._gradients = FreshEveryCall()
        calls[mode] = backend.kernel(problem)
    return calls


def timed(f, cpu: list | None = None) -> float:
    """Wall ms of ``f()``; its process CPU ms (every thread's) appended to ``cpu``."""
    c0, t0 = time.process_time(), time.perf_counter()
    f()
    wall = (time.perf_counter() - t0) * 1e3
    if cpu is not None:
        cpu.append((time.process_time() - c0) * 1e3)
    return wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", action="append", help="T,N,C,L (repeatable)")
    parser.add_argument("--threads", default="1", help="thread counts, e.g. 1,2")
    parser.add_argument("--repeat", type=int, default=5, help="calls per cell and round")
    parser.add_argument("--rounds", type=int, default=2)
    a = parser.parse_args()
    import torch

    print(cpu_line(cpu_description()), flush=True)
    for size in a.size or SIZES:
        T, N, C, L = (int(v) for v in size.split(","))
        problem, torch_call = setup(T, N, C, L)
        scaling = {}  # threads -> (wall ms, CPU ms) of "reuse b2b", medians over the rounds
        for threads in (int(v) for v in a.threads.split(",")):
            torch.set_num_threads(threads)
            calls = numba_calls(problem, threads)
            for call in calls.values():
                call()  # compiled (or loaded), memory first touched
            reference = torch_call()

            def touch():
                np.empty((T, N, C)).fill(0.0)
            cells = {f"{mode} {pattern}": (calls.get(mode, touch), pattern == "alt")
                     for mode in ("reuse", "fresh", "touch") for pattern in ("b2b", "alt")}
            if threads > 1:  # after torch and 20 ms idle: torch's OpenMP threads stop spinning
                cells["reuse idle"] = (calls["reuse"], "idle")
            for rnd in range(a.rounds):
                times = {name: [] for name in [*cells, "torch"]}
                cpu = []
                for _ in range(a.repeat):  # call by call: every cell once per repeat
                    for name, (f, after_torch) in cells.items():
                        if after_torch:
                            times["torch"].append(timed(torch_call))
                        if after_torch == "idle":
                            time.sleep(0.02)
                        if not after_torch:
                            f()  # back to back: after a call of its own
                        times[name].append(timed(f, cpu if name == "reuse b2b" else None))
                med = {name: float(np.median(v)) for name, v in times.items()}
                line = "  ".join(
                    f"{name} {med[name]:.1f}" + (f" ({med[name] / med['torch']:.3f}x torch)"
                                                 if not name.startswith("touch") else "")
                    for name in cells)
                ratios = "  ".join(f"{mode} alt/b2b {med[mode + ' alt'] / med[mode + ' b2b']:.2f}"
                                   for mode in ("reuse", "fresh"))
                print(f"T={T} N={N} C={C} L={L} threads={threads} round {rnd + 1}: ms "
                      f"{line}  torch {med['torch']:.0f}  {ratios}", flush=True)
                scaling.setdefault(threads, []).append((med["reuse b2b"], float(np.median(cpu))))
            loss, grad = calls["reuse"]()
            print(f"  against torch: loss {np.max(np.abs(loss - reference[0]) / np.abs(reference[0])):.1e}"
                  f" (relative), gradient {np.max(np.abs(grad - reference[1])):.1e} (absolute)",
                  flush=True)
        one = np.median(np.array(scaling.get(1, [(np.nan, np.nan)])), axis=0)
        for threads, rows in scaling.items():
            if threads > 1:  # where a shortfall goes: more CPU per cell, or threads idle
                wall, cpu = np.median(np.array(rows), axis=0)
                print(f"  {threads} threads (reuse b2b): speed-up {one[0] / wall:.2f}x, CPU time "
                      f"{cpu / one[1]:.2f}x one thread's, threads busy {cpu / threads / wall:.2f} "
                      f"of the wall", flush=True)


if __name__ == "__main__":
    main()
