"""Backends with a planted cliff, for the datasheet's tests (not collected by pytest).

Each is the numba backend (exact, fast at every size) until one quantity passes its cliff;
past it, it is wrong, crashes, hangs or refuses. A datasheet must report each cliff to the
step. The others misbehave in their raw framework call (``raw_ctc``) or drift in float32.
"""
from __future__ import annotations

import os
import signal
import time
from types import SimpleNamespace

import numpy as np

from ctcbench.backends.numba.backend import NumbaBackend
from ctcbench.runtime.protocol import UnsupportedProblem


class _Cliff(NumbaBackend):
    isolated = True

    def past(self, problem) -> bool:
        raise NotImplementedError

    def fall(self, problem):
        raise NotImplementedError

    def run(self, problem, **kwargs):
        if self.past(problem):
            return self.fall(problem)
        return super().run(problem, **kwargs)


class WrongPastL300(_Cliff):
    """Right up to 300 labels, its loss 1 % high past them."""

    def past(self, problem):
        return problem.shape[3] > 300

    def fall(self, problem):
        r = NumbaBackend.run(self, problem)
        return SimpleNamespace(loss=r.loss * 1.01, grad_logits=r.grad_logits)


class CrashPastT700(_Cliff):
    """Right up to 700 frames, a real SIGSEGV past them."""

    def past(self, problem):
        return problem.shape[0] > 700

    def fall(self, problem):
        import ctypes
        ctypes.string_at(0)  # reads address 0: SIGSEGV


class HangPastN40(_Cliff):
    """Right up to a batch of 40, never answers past it."""

    def past(self, problem):
        return problem.shape[1] > 40

    def fall(self, problem):
        time.sleep(3600)


class RefusePastC1000(_Cliff):
    """Right up to 1000 classes, refuses more (as cuDNN refuses long labels)."""

    def past(self, problem):
        return problem.shape[2] > 1000

    def fall(self, problem):
        raise UnsupportedProblem(f"at most 1000 classes, got {problem.shape[2]}")


class WrongFromLabel255(_Cliff):
    """Wrong once a target holds a label of 255 or more (a uint8 label type)."""

    def past(self, problem):
        return int(problem.targets.max(initial=0)) >= 255

    def fall(self, problem):
        r = NumbaBackend.run(self, problem)
        return SimpleNamespace(loss=r.loss + 0.5, grad_logits=r.grad_logits)


class DriftsWithTAndScale(NumbaBackend):
    """float32-like drift: the loss off by 1e-7 * T * (largest |logit|), planted so the worst
    case sits at long, large-scale inputs; the gradient exact."""

    isolated = True

    def run(self, problem, **kwargs):
        r = super().run(problem, **kwargs)
        T = problem.shape[0]
        scale = float(np.abs(problem.clean_logits()).max(initial=0.0))
        drift = 1e-7 * T * scale
        return SimpleNamespace(loss=r.loss + drift, grad_logits=r.grad_logits)


class RawSegfaults(NumbaBackend):
    """Its raw call segfaults on any input a CTCProblem would refuse, else answers."""

    isolated = True

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        from ctcbench.core.problem import CTCProblem
        try:
            problem = CTCProblem(logits, targets, input_lengths, target_lengths, blank=blank)
        except ValueError:
            os.kill(os.getpid(), signal.SIGSEGV)
        r = self.run(problem)
        return r.loss, r.grad_logits


class RawGarbage(NumbaBackend):
    """Its raw call returns 0.5 for every sample, whatever it is given."""

    isolated = True

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        return np.full(np.asarray(logits).shape[1], 0.5), None


class RawRaises(NumbaBackend):
    """Its raw call raises on everything."""

    isolated = True

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        raise RuntimeError("invalid argument: refused by the framework")


class RawHangs(NumbaBackend):
    """Its raw call never answers."""

    isolated = True

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        time.sleep(3600)


class NoRawHook:
    """numba's answers, and no raw_ctc hook of its own."""

    isolated = True

    def __init__(self):
        self.inner = NumbaBackend()

    def run(self, problem, **kwargs):
        return self.inner.run(problem, **kwargs)


class DriftsWithTAndFirstLogit(NumbaBackend):
    """A loss off by 1e-8 * T**2 * |the first logit|: an error that grows faster than the
    float32 bound (linear in T) and meets it at a size that depends on the draw, no cliff."""

    isolated = True

    def run(self, problem, **kwargs):
        r = super().run(problem, **kwargs)
        drift = 1e-8 * problem.shape[0] ** 2 * abs(float(problem.clean_logits()[0, 0, 0]))
        return SimpleNamespace(loss=r.loss + drift, grad_logits=r.grad_logits)


class NaNOnSecondCall(NumbaBackend):
    """Right, except that every second call's losses are NaN."""

    isolated = True
    calls = 0

    def run(self, problem, **kwargs):
        r = super().run(problem, **kwargs)
        type(self).calls += 1
        if type(self).calls % 2 == 0:
            return SimpleNamespace(loss=np.full_like(r.loss, np.nan), grad_logits=r.grad_logits)
        return r


class DriftsAtT300C500(NumbaBackend):
    """A loss off by up to 1.0, largest for T near 300 and C near 500 and falling off with
    log-distance from there: a worst case inside the space, away from every corner."""

    isolated = True

    def run(self, problem, **kwargs):
        import math
        r = super().run(problem, **kwargs)
        T, _, C, _ = problem.shape
        drift = math.exp(-(math.log(T / 300) ** 2 + math.log(C / 500) ** 2))
        return SimpleNamespace(loss=r.loss + drift, grad_logits=r.grad_logits)
