"""Plugins with a ``raw_ctc`` hook that crash, hang or raise on purpose (not collected by
pytest), to test the worker's ``raw`` request.

Each misbehaves only when ``blank == 1`` and otherwise answers with the float64 reference
(``NumpyBackend.raw_ctc``), so a restarted worker's next answer can be checked against brute
force.
"""
from __future__ import annotations

import os
import signal
import time

import numpy as np

from ctcbench.backends.numpy_ref import NumpyBackend
from ctcbench.runtime.protocol import UnsupportedProblem


class FrameworkError(RuntimeError):
    """An exception class of a "framework" outside the builtins."""


class RawSegfaultOnBlankOne(NumpyBackend):
    """raw_ctc kills its own process with SIGSEGV when ``blank == 1``."""

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        if blank == 1:
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().raw_ctc(logits, targets, input_lengths, target_lengths, blank=blank)


class RawHangOnBlankOne(NumpyBackend):
    """raw_ctc never answers when ``blank == 1``; its ``timeout_s`` trait is long, so only a
    per-call timeout can stop it soon."""

    timeout_s = 600.0

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        if blank == 1:
            time.sleep(3600)
        return super().raw_ctc(logits, targets, input_lengths, target_lengths, blank=blank)


class RawRaises(NumpyBackend):
    """raw_ctc raises, by ``blank``: 1 ZeroDivisionError (a builtin), 2 FrameworkError (this
    module's), 3 UnsupportedProblem, 4 a RuntimeError with a 5000-character message; 5
    returns a bare array instead of a ``(loss, grad)`` pair."""

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        if blank == 1:
            return 1 / 0
        if blank == 2:
            raise FrameworkError("labels out of range in the framework")
        if blank == 3:
            raise UnsupportedProblem("raw-raises cannot express a negative length")
        if blank == 4:
            raise RuntimeError("x" * 5000)
        if blank == 5:
            return np.zeros(3)
        return super().raw_ctc(logits, targets, input_lengths, target_lengths, blank=blank)


class RawEcho:
    """raw_ctc sends the arrays back: ``loss`` the targets, input lengths and target lengths
    flattened one after another, ``grad_logits`` the logits; a TypeError when the arrays did
    not arrive as float32 logits and int64 indices (grad None when ``blank == 7``)."""

    def run(self, problem):  # pragma: no cover - only raw_ctc is used
        raise NotImplementedError

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        dtypes = [a.dtype.name for a in (logits, targets, input_lengths, target_lengths)]
        if dtypes != ["float32", "int64", "int64", "int64"]:
            raise TypeError(f"raw-echo: arrays arrived as {dtypes}")
        flat = np.concatenate([targets.ravel(), input_lengths, target_lengths])
        return flat.astype(np.float64), None if blank == 7 else logits


class NoRawHook:
    """A backend with ``run`` only."""

    def run(self, problem):  # pragma: no cover - only raw_ctc is asked for
        raise NotImplementedError
