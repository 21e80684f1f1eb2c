"""Backends that are wrong on purpose, each in a way a real implementation has been: fuzz must
find each one and shrink it to a small case that `compare` then fails."""
from __future__ import annotations

import numpy as np

from ctcbench import CTCProblem
from ctcbench.backends.numpy_ref import NumpyBackend


class MergesRepeats:
    """Target [1, 1, 2] scored as [1, 2] (a collapse of repeated labels before the loss)."""

    def run(self, problem):
        rows = [[k for i, k in enumerate(t[:n]) if i == 0 or k != t[i - 1]]
                for t, n in zip(problem.targets.tolist(), problem.target_lengths)]
        width = max([len(r) for r in rows] + [1])
        targets = np.array([r + [problem.blank] * (width - len(r)) for r in rows])
        merged = CTCProblem(problem.logits, targets, problem.input_lengths, [len(r) for r in rows],
                            blank=problem.blank)
        return NumpyBackend().run(merged)


class IgnoresInputLengths:
    """Every sample scored over all T frames, as if input_lengths were T."""

    def run(self, problem):
        T = problem.shape[0]
        full = CTCProblem(np.where(problem.frame_mask[..., None], problem.logits, 0.0),
                          problem.targets, np.full(problem.shape[1], T), problem.target_lengths,
                          blank=problem.blank)
        return NumpyBackend().run(full)


class ProbabilitySpace:
    """The forward recursion in plain probabilities, no rescaling: exact on short inputs, the loss
    underflows to inf on long ones."""

    def run(self, problem):
        result = NumpyBackend().run(problem)
        probs = np.exp(problem.log_probs())  # (T, N, C)
        loss = result.loss.copy()
        for n in range(problem.shape[1]):
            target = problem.targets[n, : problem.target_lengths[n]]
            ext = np.full(2 * len(target) + 1, problem.blank)  # (S,)
            ext[1::2] = target
            S, T_n = len(ext), int(problem.input_lengths[n])
            if not np.isfinite(loss[n]) or T_n == 0:
                continue
            alpha = np.zeros(S)
            alpha[:2] = probs[0, n, ext[:2]]
            for t in range(1, T_n):
                prev = alpha.copy()
                alpha[1:] += prev[:-1]
                skip = np.zeros(S, bool)
                skip[2:] = (ext[2:] != problem.blank) & (ext[2:] != ext[:-2])
                alpha[2:] += np.where(skip[2:], prev[:-2], 0.0)
                alpha *= probs[t, n, ext]
            with np.errstate(divide="ignore"):
                loss[n] = -np.log(alpha[-1] + (alpha[-2] if S > 1 else 0.0))
        result.loss = loss
        return result


class LossBelowZero:
    """float32 only: the loss 1e-7 low, inside float32's loss tolerance, so only the invariant
    catches it: below 0 on a near-certain alignment (google-deepmind/optax#1771 gives -2.06e-8)."""

    dtypes = ("float32",)

    def run(self, problem):
        result = NumpyBackend().run(problem)
        result.loss = result.loss - 1e-7
        return result


class Nondeterministic:
    """Right within 1e-13 relative, but each call's gradient rounds differently, as atomic adds
    in another order do (pytorch/pytorch#17798): only a second call shows it."""

    def run(self, problem):
        result = NumpyBackend().run(problem)
        jitter = np.random.default_rng().uniform(-1e-13, 1e-13, result.grad_logits.shape)
        result.grad_logits = result.grad_logits * (1 + jitter)  # zeros stay zeros
        return result


class DeclaredNondeterministic(Nondeterministic):
    """The same, declaring how far two calls may differ."""

    nondeterministic = 1e-9


class WrongPastL256:
    """Right up to 256 labels; past that every loss is 1e-3 high, as a kernel that switches path
    at a buffer size would be (cuDNN's CTC fails at target length 256, pytorch/pytorch#53505)."""

    def run(self, problem):
        result = NumpyBackend().run(problem)
        result.loss = np.where(problem.target_lengths > 256, result.loss + 1e-3, result.loss)
        return result


class LabelsAsUint8:
    """Stores labels in 8 bits: label 256 becomes 0, 257 becomes 1 (wrong wherever C > 256)."""

    def run(self, problem):
        wrapped = CTCProblem(problem.logits, problem.targets % 256, problem.input_lengths,
                             problem.target_lengths, blank=problem.blank)
        return NumpyBackend().run(wrapped)


class HalfPrecision:
    """float16 only: the exact answer rounded to float16, as a right half-precision kernel
    returns it (its error is the arithmetic's, within the float16 bound)."""

    dtypes = ("float16",)

    def run(self, problem):
        result = NumpyBackend().run(problem)
        with np.errstate(over="ignore"):  # a loss past 65504 is inf in float16
            result.loss = result.loss.astype(np.float16).astype(np.float64)
        result.grad_logits = result.grad_logits.astype(np.float16).astype(np.float64)
        return result


class HalfPrecisionOff(HalfPrecision):
    """The same, but each loss 5% high: past any float16 round-off bound."""

    def run(self, problem):
        result = super().run(problem)
        result.loss = result.loss * 1.05
        return result


class SometimesDifferent:
    """The reference's answer, but every fourth call's gradient is 1e-13 off (relative), as a
    kernel that picks another reduction order now and then: two calls in a row may agree."""

    def __init__(self):
        self.calls = 0

    def run(self, problem):
        self.calls += 1
        result = NumpyBackend().run(problem)
        if self.calls % 4 == 0:
            result.grad_logits = result.grad_logits * (1 + 1e-13)
        return result
