"""Gradient arrays handed out again once every caller has let go of them.

A gradient is ``T N C`` numbers, 320 MB at T=1000 N=8 C=5000 in float64. A fresh one is fresh
memory: the kernel then pays for the first touch of every page (at 4 KiB pages, 150 ms of a
100 ms kernel on the AMD EPYC measured here), and after a torch call has churned a GB, the
transparent huge pages numpy asks for can stall for compaction (300-900 ms). A training step
drops its loss's gradient once the backward pass is done, so the array the call before last
returned is usually free again by the next call: :class:`Reusable` hands it out instead of
new memory (docs/numba.md, "Fresh memory").

Free means no reference but the pool's own: an array a caller still holds, a view of it, a
torch tensor made by ``torch.from_numpy`` (which holds the array), is never handed out again.
"""
from __future__ import annotations

import sys
import threading

import numpy as np

KEEP = 2  # a loop ``result = run(...)`` holds the last result while the next call runs


def _free_refs() -> int:
    """``sys.getrefcount`` of an array held by a list alone, on this interpreter."""
    held = [np.empty(0)]
    return sys.getrefcount(held[0])


FREE_REFS = _free_refs()


class Reusable:
    """Up to :data:`KEEP` arrays of the shape and dtype last asked for; thread-safe."""

    def __init__(self):
        self._arrays: list[np.ndarray] = []
        self._lock = threading.Lock()

    def empty(self, shape: tuple[int, ...], dtype) -> np.ndarray:
        """An uninitialised ``shape`` array of ``dtype``: one of the kept arrays nobody else
        holds any more, or a new one (kept in its turn)."""
        dtype = np.dtype(dtype)
        with self._lock:
            self._release_other(shape, dtype)
            for i in range(len(self._arrays)):
                if sys.getrefcount(self._arrays[i]) == FREE_REFS:
                    return self._arrays[i]
            array = np.empty(shape, dtype)
            self._arrays = self._arrays[len(self._arrays) + 1 - KEEP:] + [array]
            return array

    def release(self, shape: tuple[int, ...] | None = None, dtype=None) -> None:
        """Let go of every kept array, or of those not of ``shape`` and ``dtype`` (before a
        call of another shape, so that the memory check sees that memory free)."""
        with self._lock:
            self._release_other(shape, None if dtype is None else np.dtype(dtype))

    def _release_other(self, shape, dtype) -> None:
        self._arrays = [a for a in self._arrays if a.shape == shape and a.dtype == dtype]


GRADIENTS = Reusable()  # one for the process: a loop may make a new backend object per call
