"""The sizes a datasheet searches: one axis per quantity, each a family of problems ``build(p)``
that grows one quantity ``p`` and keeps the others as small as the problem allows.

Every problem is a case library ``[case.build]`` table (generator ``random``, logits N(0, 1),
seeded), so the first wrong size can be written as a case file and rerun with ``compare``.
Targets never repeat a label twice in a row, so a target of ``L`` labels fits in ``L`` frames.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ctcbench.caselib.builders import MAX_CELLS, MAX_FRAMES


def _labels(L: int, C: int, first: int = 1) -> list[int]:
    """``L`` labels in ``[1, C)`` cycling from ``first``, no two equal in a row (C >= 3 or L <= 1)."""
    return [(first - 1 + i) % (C - 1) + 1 for i in range(L)]


def _build(T: int, C: int, targets: list[list[int]], seed: int) -> dict:
    return {"generator": "random", "C": C, "blank": 0, "seed": seed, "scale": 1.0, "T": T,
            "sample": [{"target": t, "T": T} for t in targets]}


@dataclass(frozen=True)
class Axis:
    """One quantity grown from ``start`` up to ``cap``; ``build(p, seed)`` the problem at ``p``.

    ``shape(p)`` is ``(T, N, C, L)`` of that problem, known without building it, so its cost
    (``T * N * (2L + 1)`` cells, ``T * N * C`` logits) is known before it is run.
    """

    name: str
    what: str  # what p is, for people
    start: int
    cap: int
    shape: Callable[[int], tuple[int, int, int, int]]
    targets: Callable[[int], list[list[int]]]

    def build(self, p: int, seed: int = 0) -> dict:
        T, N, C, L = self.shape(p)
        return _build(T, C, self.targets(p), seed)

    def cells(self, p: int) -> int:
        T, N, C, L = self.shape(p)
        return T * N * (2 * L + 1)

    def logits(self, p: int) -> int:
        T, N, C, L = self.shape(p)
        return T * N * C


def _l_frames(L: int) -> int:
    """Frames for the L axis: room for the target and a quarter more, so paths can differ."""
    return L + L // 4 + 4


TL_RATIO = 4  # the T·L axis: T = TL_RATIO * L

# The caps keep each problem within what a case file may build (MAX_FRAMES, MAX_CELLS).
AXES: dict[str, Axis] = {a.name: a for a in (
    Axis("T", "frames (N=1, C=8, L=2)", 8, 2**19,
         lambda p: (p, 1, 8, 2), lambda p: [[1, 2]]),
    Axis("L", "labels per target (T = 1.25 L + 4, N=1, C=8)", 1, 2**14,
         lambda p: (_l_frames(p), 1, 8, p), lambda p: [_labels(p, 8)]),
    Axis("C", "classes, blank included (T=8, N=1, target [1])", 2, 2**20,
         lambda p: (8, 1, p, 1), lambda p: [[1]]),
    Axis("N", "batch (T=16, C=8, L=4)", 1, 2**16,
         lambda p: (16, p, 8, 4), lambda p: [_labels(4, 8, 1 + n % 7) for n in range(p)]),
    Axis("label", "the largest label value (C = label + 1, T=4, N=1, target [1, label])", 2,
         2**23, lambda p: (4, 1, p + 1, 2), lambda p: [[1, p]]),
    Axis("TL", f"labels with T = {TL_RATIO} L (N=1, C=8); the value is L", 1, 2**13,
         lambda p: (TL_RATIO * p, 1, 8, p), lambda p: [_labels(p, 8)]),
)}

assert all(a.shape(a.cap)[0] <= MAX_FRAMES and a.logits(a.cap) <= MAX_CELLS for a in AXES.values())
