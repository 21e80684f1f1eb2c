"""Backends that crash or hang on purpose, to test worker isolation (not collected by pytest).

Each computes the real NumPy reference when it behaves, so a restarted worker's answers
can still be checked against the brute-force oracle.
"""
from __future__ import annotations

import os
import signal
import time

from ctcbench.backends.numpy_ref import NumpyBackend


class SegfaultOnBlankOne(NumpyBackend):
    """Segfaults (a real SIGSEGV, via a NULL read) when ``blank == 1``."""

    isolated = True

    def run(self, problem):
        if problem.blank == 1:
            import ctypes
            ctypes.string_at(0)  # reads address 0: SIGSEGV
        return super().run(problem)


class AbortOnBlankOne(NumpyBackend):
    """Aborts (SIGABRT, as a failed C assertion would) when ``blank == 1``."""

    isolated = True

    def run(self, problem):
        if problem.blank == 1:
            os.abort()
        return super().run(problem)


class HangOnBlankOne(NumpyBackend):
    """Never answers when ``blank == 1``."""

    isolated = True
    timeout_s = 3.0

    def run(self, problem):
        if problem.blank == 1:
            time.sleep(3600)
        return super().run(problem)


class ExitOnBlankOne(NumpyBackend):
    """Exits the process with status 3 when ``blank == 1``."""

    isolated = True

    def run(self, problem):
        if problem.blank == 1:
            os._exit(3)
        return super().run(problem)


class SegfaultAlways(NumpyBackend):
    """A plugin that kills its process on every problem."""

    isolated = True

    def run(self, problem):
        os.kill(os.getpid(), signal.SIGSEGV)


class NeedsMissingPackage:
    """Unavailable everywhere: its constructor raises the way a real adapter does."""

    isolated = True

    def __init__(self):
        from ctcbench.runtime.protocol import BackendUnavailable
        raise BackendUnavailable("package 'not-a-real-ctc-package' is not installed",
                                 "pip install not-a-real-ctc-package")


class PrintsToStdout(NumpyBackend):
    """Writes to stdout, from Python and from the file descriptor, on every problem."""

    isolated = True

    def run(self, problem):
        print("chatty framework output")
        os.write(1, b"\x00\x00\x00\x05 raw bytes on fd 1\n")
        return super().run(problem)


class SegfaultAlwaysKnownOnTfBasic(SegfaultAlways):
    """Declares its crash on the case ``tf_basic`` as a known upstream issue."""

    known_issues = {"tf_basic/*": "segfaults on the TensorFlow testBasic tables"}


class RaisesOnRequest(NumpyBackend):
    """Raises in the worker: UnsupportedProblem for float16, ValueError for blank 1,
    ZeroDivisionError (no counterpart in ctcbench) for blank 2."""

    isolated = True

    def run(self, problem):
        from ctcbench.runtime.protocol import UnsupportedProblem
        if problem.dtype == "float16":
            raise UnsupportedProblem("raises-on-request computes in float32/float64, not float16")
        if problem.blank == 1:
            raise ValueError("blank: expected 0, got 1")
        if problem.blank == 2:
            return 1 / 0
        return super().run(problem)


class SegfaultOnThirdCall(NumpyBackend):
    """A plugin whose worker survives two calls (a bench's warm-up and calibration) and dies
    on the third."""

    isolated = True
    calls = 0

    def run(self, problem):
        SegfaultOnThirdCall.calls += 1
        if SegfaultOnThirdCall.calls >= 3:
            os.kill(os.getpid(), signal.SIGSEGV)
        return super().run(problem)
