"""Backends with a known cost, to test where bench's clock runs (not collected by pytest)."""
from __future__ import annotations

import time

import numpy as np

from ctcbench.protocol import BackendResult

SLEEP_S = 0.05


class SleepsFiftyMs:
    """Isolated; each call sleeps 50 ms and returns zeros of the problem's shapes, so the
    call's own cost is known and a large problem makes the round trip to its worker long."""

    isolated = True

    def run(self, problem):
        time.sleep(SLEEP_S)
        T, N, C, _ = problem.shape
        return BackendResult(np.zeros(N), np.zeros((T, N, C)))
