"""Backends with a known cost, to test where bench's clock runs (not collected by pytest)."""
from __future__ import annotations

import time

import numpy as np

from ctcbench.runtime.protocol import BackendResult

SLEEP_S = 0.05


class SleepsFiftyMs:
    """Isolated; each call sleeps 50 ms and returns zeros of the problem's shapes, so the
    call's own cost is known and a large problem makes the round trip to its worker long."""

    isolated = True

    def run(self, problem):
        time.sleep(SLEEP_S)
        T, N, C, _ = problem.shape
        return BackendResult(np.zeros(N), np.zeros((T, N, C)))


class ConvertsForAHundredMs:
    """In-process; ``run`` spends 100 ms converting and then 50 ms computing; its ``kernel``
    converts once, at build time, and each call then costs the 50 ms computation alone."""

    CONVERT_S = 0.1

    def run(self, problem):
        time.sleep(self.CONVERT_S)
        return self.kernel(problem)()

    def kernel(self, problem):
        T, N, C, _ = problem.shape

        def call():
            time.sleep(SLEEP_S)
            return BackendResult(np.zeros(N), np.zeros((T, N, C)))
        return call


class ConvertsForAHundredMsIsolated(ConvertsForAHundredMs):
    isolated = True
