"""What a call of a backend will cost, predicted from the calls it has made.

A CTC implementation's time on a problem is a sum of a few kinds of work, each summed over
the samples: a per-call and a per-sample overhead, per-frame work (``Tn``), a pass over the
extended states (``Tn * Sn``, ``Sn = 2 Ln + 1``), a softmax over the classes (``Tn * C``), and
the quadratic work of a backward pass recomputed per frame (``Tn²``, ``Tn² * Sn``).
:class:`CostModel` fits the seconds of the calls seen to those terms (non-negative least
squares on relative errors), only on calls long enough that their work, not the fixed cost
of a call, shows (:data:`INFORMATIVE`), and predicts a problem's seconds; the term that
dominates the prediction is its growth (``O(T²)``).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

# name of each term, as the growth it stands for; T frames, L target length, C classes
TERMS = ("O(1)", "O(N)", "O(T)", "O(T·L)", "O(T·C)", "O(T²)", "O(T²·L)")
INFORMATIVE = (0.01, 100.0)  # calls fitted: >= 10 ms, and within 100x of the slowest
MIN_CALLS = 4  # informative calls needed before anything is predicted


def work(problem) -> np.ndarray:
    """``(len(TERMS),)`` the amount of each kind of work in one call on ``problem``."""
    T, N, C, _ = problem.shape
    frames = np.asarray(problem.input_lengths, np.float64)  # (N,)
    states = 2.0 * np.asarray(problem.target_lengths, np.float64) + 1  # (N,)
    return np.array([1.0, N, frames.sum(), (frames * states).sum(), frames.sum() * C,
                     (frames ** 2).sum(), (frames ** 2 * states).sum()])


@dataclass(frozen=True)
class Prediction:
    """A call's predicted ``seconds``, its ``growth`` (the dominant term) and the call seen
    that it is read from: the slowest, ``seen_s`` seconds at ``seen_T`` frames."""

    seconds: float
    growth: str
    T: int
    seen_s: float
    seen_T: int

    def __str__(self) -> str:
        return (f"{self.growth}: {seconds_said(self.seconds)} predicted at T={self.T} from "
                f"{seconds_said(self.seen_s)} at T={self.seen_T}")


def seconds_said(s: float) -> str:
    """Seconds as a prediction is said: two digits below 10 s, whole seconds above."""
    return f"{s:.2g} s" if s < 10 else f"{s:.0f} s"


def nonnegative_lstsq(A: np.ndarray, b: np.ndarray) -> np.ndarray:
    """``x >= 0`` minimising ``|A x - b|``: the best least-squares fit over every subset of
    the columns whose solution is non-negative (few columns, so every subset is tried). Of
    fits equal but for rounding (columns in proportion), the first found, fewest columns."""
    best, found = np.inf, np.zeros(A.shape[1])
    for k in range(1, A.shape[1] + 1):
        for cols in itertools.combinations(range(A.shape[1]), k):
            x = np.linalg.lstsq(A[:, cols], b, rcond=None)[0]
            residual = float(np.sum((A[:, cols] @ x - b) ** 2))
            if (x >= 0).all() and residual < best * (1 - 1e-9):
                best, found = residual, np.zeros(A.shape[1])
                found[list(cols)] = x
    return found


class CostModel:
    """The calls of one backend: :meth:`add` what a call (or several, summed) took,
    :meth:`predict` a problem's seconds once enough calls were long enough to tell."""

    def __init__(self):
        self.calls: list[tuple[np.ndarray, float, int, float]] = []  # (work, seconds, T,
        # seconds a call)
        self._fit = None

    def add(self, problems, seconds: float) -> None:
        """``problems`` ran one after another in ``seconds`` in all."""
        problems = list(problems)
        if problems and seconds > 0:
            self.calls.append((sum(work(p) for p in problems), float(seconds),
                               max(p.shape[0] for p in problems), seconds / len(problems)))
            self._fit = None

    def _coefficients(self) -> np.ndarray | None:
        if self._fit is None:
            least, within = INFORMATIVE
            slowest = max((s for _, s, _, _ in self.calls), default=0.0)
            used = [(w, s) for w, s, _, _ in self.calls if s >= max(least, slowest / within)]
            if len(used) < MIN_CALLS:
                return None
            A = np.array([w for w, _ in used])  # (calls, terms)
            seconds = np.array([s for _, s in used])
            scale = np.where(A.max(axis=0) > 0, A.max(axis=0), 1.0)  # columns of one size
            x = nonnegative_lstsq(A / scale / seconds[:, None], np.ones(len(used)))
            self._fit = x / scale
        return self._fit

    def predict(self, problem) -> Prediction | None:
        """The seconds of one call on ``problem``; None until :data:`MIN_CALLS` informative
        calls were seen."""
        x = self._coefficients()
        if x is None:
            return None
        terms = work(problem) * x
        _, _, seen_T, seen_s = max(self.calls, key=lambda c: c[3])
        return Prediction(float(terms.sum()), TERMS[int(np.argmax(terms))],
                          int(problem.shape[0]), seen_s, seen_T)
