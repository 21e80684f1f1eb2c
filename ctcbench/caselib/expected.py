"""Known answers for a case's base problem, from an independent oracle or a published value.

Every oracle works per sample on the valid frames of the problem *as built in the dtype under
test* (so rounding of the inputs is not counted as a backend's error), in float64:
  published     loss (and per-frame gradient, if given) copied from a public test;
  brute_force   enumerate every path (tiny T and C), loss and gradient;
  single_path   T_n == L_n + repeats: one alignment, loss -sum log p, gradient softmax - onehot;
  empty_target  loss -sum log p(blank), gradient softmax - onehot(blank);
  uniform       constant logits per frame: loss T log C - log binom(T + L - r, 2L), no gradient;
  reference     the ``numpy`` backend (for users' cases without an oracle; says so in the row);
  finite_difference  the loss of the ``numpy`` backend; the gradient is checked against
                central differences of each backend's own loss (``ctcbench.compare.extra``).
With ``samples = [...]`` a published case may give values for those samples only.
A target that does not fit (T_n < L_n + repeats) has loss inf and zero gradient under every
oracle but ``published``.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ctcbench.caselib import fields
from ctcbench.core import oracles
from ctcbench.core.ctcmath import log_softmax, min_frames, minimal_path
from ctcbench.core.problem import CTCProblem


@dataclass
class Answer:
    loss: np.ndarray  # (N,) float64
    grad: np.ndarray | None  # (T, N, C) float64, or None when the oracle gives no gradient
    source: str  # the oracle's name
    result: object = None  # the reference's whole BackendResult, where the oracle is its run


def _softmax(x: np.ndarray) -> np.ndarray:
    return np.exp(log_softmax(x))


def _brute_force(x, target, blank, case, n):
    return oracles.brute_force(x, target, blank=blank)


def _single_path(x, target, blank, case, n):
    if len(x) != min_frames(target):
        raise ValueError(f"case {case!r} sample {n}: expected input length L + repeats = "
                         f"{min_frames(target)} (oracle single_path), got {len(x)}")
    path = minimal_path(target, blank=blank)
    grad = _softmax(x)
    grad[np.arange(len(path)), path] -= 1.0
    return oracles.path_loss(x, path), grad


def _empty_target(x, target, blank, case, n):
    if len(target):
        raise ValueError(f"case {case!r} sample {n}: expected an empty target (oracle "
                         f"empty_target), got length {len(target)}")
    grad = _softmax(x)
    grad[:, blank] -= 1.0
    return oracles.empty_target_loss(x, blank=blank), grad


def _uniform(x, target, blank, case, n):
    if len(x) and np.ptp(x, axis=1).max() != 0:
        raise ValueError(f"case {case!r} sample {n}: expected logits constant over classes in "
                         f"every frame (oracle uniform), got a spread of {np.ptp(x, axis=1).max()}")
    return oracles.uniform_loss(len(x), x.shape[1], target), None


ORACLES = {
    "published": None,  # values in the case file
    "brute_force": _brute_force,
    "single_path": _single_path,
    "empty_target": _empty_target,
    "uniform": _uniform,
    "reference": None,  # the numpy backend
    "finite_difference": None,  # loss: the numpy backend; gradient: per backend, by differences
}


def _published(problem: CTCProblem, expect: dict, case: str) -> Answer:
    T, N, C, _ = problem.shape
    loss = fields.array(expect.get("loss", []), f"case {case!r} expect.loss", integer=False)
    chosen = list(range(N))
    if "samples" in expect and loss.shape == (len(expect["samples"]),):
        chosen = list(expect["samples"])  # values for the checked samples only
        if max(chosen) >= N:
            raise ValueError(f"case {case!r} expect.samples: expected indices < N = {N}, "
                             f"got {chosen}")
        loss = np.full(N, np.nan)
        loss[chosen] = expect["loss"]  # NaN: not published, not checked
    if loss.shape != (N,):
        raise ValueError(f"case {case!r} expect.loss: expected {N} published values "
                         f"(one per sample, or one per expect.samples), got shape {loss.shape}")
    grad = None
    if "grad" in expect:
        grad = np.zeros((T, N, C))
        if not isinstance(expect["grad"], list) or len(expect["grad"]) != len(chosen):
            raise ValueError(f"case {case!r} expect.grad: expected one (T_n, C) table per "
                             f"sample ({len(chosen)}), got {expect['grad']!r:.80}")
        for n, g in zip(chosen, expect["grad"]):
            g = fields.array(g, f"case {case!r} expect.grad[{n}]", integer=False)
            want = (int(problem.input_lengths[n]), C)
            if g.shape != want:
                raise ValueError(f"case {case!r} expect.grad[{n}]: expected shape {want}, "
                                 f"got {g.shape}")
            grad[: want[0], n] = g
    return Answer(loss, grad, "published")


def known_answer(problem: CTCProblem, expect: dict, *, case: str = "?") -> Answer:
    """The answer ``expect`` promises for ``problem`` (the case's base problem)."""
    name = expect["oracle"]
    if name == "published":
        return _published(problem, expect, case)
    if name in ("reference", "finite_difference"):
        from ctcbench.runtime.registry import REFERENCE, get_backend
        result = get_backend(REFERENCE).run(problem)
        return Answer(result.loss, result.grad_logits if name == "reference" else None, name,
                      result)
    T, N, C, _ = problem.shape
    loss, grad = np.zeros(N), np.zeros((T, N, C))
    has_grad = True
    for n in range(N):
        T_n, L_n = int(problem.input_lengths[n]), int(problem.target_lengths[n])
        x = problem.logits[:T_n, n].astype(np.float64)  # (T_n, C) as rounded to the dtype
        target = problem.targets[n, :L_n].tolist()
        if T_n < min_frames(target):  # no alignment fits
            loss[n] = math.inf
            continue
        loss[n], g = ORACLES[name](x, target, problem.blank, case, n)
        if g is None:
            has_grad = False
        else:
            grad[:T_n, n] = g
    return Answer(loss, grad if has_grad else None, name)
