"""How far apart the normalised forward and backward rows of a sample are: what decides whether
probability-space rows of a dtype can hold it (docs/numba.md, "The float32 compute").

Not a test: a measurement. For samples of random N(0, 1) logits and random targets (the
inputs of ``benchmarks/numba_kernel.py``), in float64 NumPy with every row divided by its own
sum: the smallest overlap ``min_t sum_s alpha_t(s) beta_t(s)``, and the smallest forward and
backward entry at a state the posterior puts at least 1e-6 on. float32 holds 1.2e-38 (normal)
and the numba kernel's float32 rows ask for 1e-30; float64 holds 2.2e-308 (asked: 1e-250).

    python benchmarks/row_overlap.py --size 1000,32,100,200 --size 400,32,80,60 --samples 4
"""
from __future__ import annotations

import argparse

import numpy as np


def normalised_rows(logits: np.ndarray, target: np.ndarray):
    """``(alpha (T, S), beta (T, S))`` of one sample, each row divided by its sum;
    ``logits (T, C)``, blank 0, ``target (L,)`` with no blank."""
    T = logits.shape[0]
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)  # (T, C)
    S = 2 * len(target) + 1
    ext = np.zeros(S, int)
    ext[1::2] = target
    em = p[:, ext]  # (T, S) emissions of the extended states
    skip = np.zeros(S, bool)
    skip[3::2] = target[1:] != target[:-1]
    alpha, beta = np.zeros((T, S)), np.zeros((T, S))
    a = np.zeros(S)
    a[:2] = em[0, :2]
    alpha[0] = a / a.sum()
    for t in range(1, T):
        a = alpha[t - 1].copy()
        a[1:] += alpha[t - 1][:-1]
        a[2:] += np.where(skip[2:], alpha[t - 1][:-2], 0.0)
        a *= em[t]
        alpha[t] = a / a.sum()
    beta[-1, -2:] = 0.5
    for t in range(T - 2, -1, -1):
        g = beta[t + 1] * em[t + 1]
        b = g.copy()
        b[:-1] += g[1:]
        b[:-2] += np.where(skip[2:], g[2:], 0.0)
        beta[t] = b / b.sum()
    return alpha, beta


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", action="append", help="T,N,C,L (repeatable)")
    parser.add_argument("--samples", type=int, default=4, help="samples per size")
    args = parser.parse_args()
    for size in args.size or ["1000,32,100,200", "400,32,80,60", "200,16,50,40"]:
        T, N, C, L = (int(x) for x in size.split(","))
        rng = np.random.default_rng(0)  # as benchmarks/numba_kernel.py draws them
        logits = rng.standard_normal((T, N, C))
        targets = rng.integers(1, C, (N, L))
        for n in range(min(args.samples, N)):
            alpha, beta = normalised_rows(logits[:, n], targets[n])
            z = (alpha * beta).sum(1)  # (T,)
            relevant = alpha * beta / z[:, None] > 1e-6
            print(f"T={T} C={C} L={L} sample {n}: overlap >= {z.min():.1e}; at states "
                  f"the posterior uses, alpha >= {alpha[relevant].min():.1e}, "
                  f"beta >= {beta[relevant].min():.1e}")


if __name__ == "__main__":
    main()
