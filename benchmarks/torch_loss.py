"""Time a training step's loss: ``ctcbench.torch.ctc_loss`` (numba, float64 and float32
compute) against torch's ``F.ctc_loss``, loss + ``backward``, in one process, interleaved.

Not a test: the benchmark behind docs/torch-loss.md.

    python benchmarks/torch_loss.py                      # T=400 N=32 C=80 L=60, float32
    python benchmarks/torch_loss.py --size 1000,32,100,200 --logits peaked --repeat 15

One thread for both (``torch.set_num_threads(1)``, ``CTCBENCH_THREADS=1``); per repeat each
variant runs once, and the ratio to torch is taken within the repeat (the machine's load hits
neighbours alike). The order turns by one place each repeat: whichever step runs right after
torch's is 1.6-2.2 ms slower (docs/torch-loss.md), so a fixed order (``--order fixed``) charges
that to one variant. Printed: median wall ms per variant, median and range of its ratio to
torch, and where the float32 compute's samples were computed. The problems are
``benchmarks/numba_kernel.py``'s (``--logits random`` or ``peaked``).
"""
from __future__ import annotations

import argparse
import os
import time

import numpy as np

from ctcbench.environment import cpu_description, cpu_line

os.environ["CTCBENCH_THREADS"] = "1"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", default="400,32,80,60", help="T,N,C,L")
    parser.add_argument("--logits", choices=["random", "peaked"], default="random")
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--order", choices=["turned", "fixed"], default="turned",
                        help="turned: the order moves by one place each repeat; fixed: "
                        "torch, numba float64, numba float32 every repeat")
    args = parser.parse_args()
    print(cpu_line(cpu_description()), flush=True)  # the figures hold for this CPU only
    import torch
    import torch.nn.functional as F

    import ctcbench.torch as ct
    from numba_kernel import problem  # this folder's kernel benchmark: the same problems
    from ctcbench import CTCProblem
    from ctcbench.backends.numba.backend import NumbaBackend

    torch.set_num_threads(1)
    T, N, C, L = (int(x) for x in args.size.split(","))
    x, targets = problem(T, N, C, L, "float32", "float32", args.logits)[:2]  # numba_kernel.py's
    x = torch.tensor(x, requires_grad=True)
    targets = torch.tensor(targets)
    lengths, target_lengths = torch.full((N,), T), torch.full((N,), L)

    def torch_step():
        F.ctc_loss(x.log_softmax(2), targets, lengths, target_lengths).backward()

    def ours(**kwargs):
        def step():
            ct.ctc_loss(x.log_softmax(2), targets, lengths, target_lengths, **kwargs).backward()
        return step

    steps = {"torch": torch_step, "numba float64": ours(),
             "numba float32": ours(compute_dtype="float32")}
    for step in steps.values():  # compile, warm up
        step()
    times = {name: [] for name in steps}
    names = list(steps)
    for r in range(args.repeat):
        turn = r % len(names) if args.order == "turned" else 0
        for name in names[turn:] + names[:turn]:
            step = steps[name]
            x.grad = None
            t0 = time.perf_counter()
            step()
            times[name].append(time.perf_counter() - t0)
    base = np.array(times["torch"])
    print(f"T={T} N={N} C={C} L={L}, {args.logits} float32 logits, one thread, "
          f"{args.repeat} repeats, order {args.order}")
    for name, ts in times.items():
        ratio = np.array(ts) / base
        print(f"  {name:14} {np.median(ts) * 1e3:8.2f} ms   x torch {np.median(ratio):.3f} "
              f"[{ratio.min():.3f}-{ratio.max():.3f}]")
    result = NumbaBackend(compute_dtype="float32").run(CTCProblem(
        x.detach().log_softmax(2).numpy(), targets.numpy(), lengths.numpy(),
        target_lengths.numpy()))
    print(f"  float32 compute: {int(result.float32_rows.sum())} of {N} samples in float32 "
          f"rows, the rest in float64")


if __name__ == "__main__":
    main()
