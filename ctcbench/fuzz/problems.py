"""Hypothesis strategies for CTC problems, drawn as case-file ``[case.build]`` tables.

A drawn problem is the same dict a case file holds, so a failing one is written out as a case
that ``ctcbench compare --cases`` rebuilds bit for bit. Every choice shrinks toward the simplest
problem: one sample, few classes, blank 0, short targets, few frames, uniform logits, no padding,
no masked (-inf) classes. Drawn: blank anywhere, repeats, padding garbage (0, NaN, 1e30), logit
scales 1 to 1e3, inputs up to 3000 frames (float64 underflow), empty and infeasible targets.
"""
from __future__ import annotations

import math

import numpy as np
from hypothesis import strategies as st

MAX_CLASSES = 8  # C, blank included
MAX_BATCH = 3
MAX_LABELS = 6  # per target
MAX_SHORT_FRAMES = 12
MAX_LONG_FRAMES = 3000  # long inputs: where probabilities underflow float64 (~C**-T < 1e-308)
PAD_VALUES = (0.0, math.nan, 1e30)  # what padded frames hold: ignored, whatever it is
LOGIT_KINDS = ("uniform", "normal", "peaked")
SCALES = (1.0, 4.0, 30.0, 1e3)


def _logits(kind: str, scale: float, seed: int, T_n: int, C: int, target: list[int], blank: int):
    """``(T_n, C)`` float64 logits of one sample."""
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return np.zeros((T_n, C))
    x = rng.normal(size=(T_n, C)) * scale  # (T_n, C)
    if kind == "peaked" and T_n:  # a plausible alignment: labels spread over the frames, blanks between
        path = np.full(T_n, blank)  # (T_n,)
        spots = np.linspace(0, T_n, len(target) + 2)[1:-1].astype(np.int64)  # (L,) a frame per label
        path[np.minimum(spots, T_n - 1)] = target
        x[np.arange(T_n), path] += scale
    return x


@st.composite
def builds(draw, dtypes=("float64",)) -> tuple[dict, str]:
    """(a case's ``[case.build]`` table, a dtype)."""
    C = draw(st.integers(2, MAX_CLASSES))
    blank = draw(st.integers(0, C - 1))
    labels = [c for c in range(C) if c != blank]
    long_inputs = draw(st.booleans())
    kind = draw(st.sampled_from(LOGIT_KINDS))
    scale = draw(st.sampled_from(SCALES))
    seed = draw(st.integers(0, 2**16))
    frames = st.integers(0, MAX_LONG_FRAMES if long_inputs else MAX_SHORT_FRAMES)
    drawn = draw(st.lists(st.tuples(st.lists(st.sampled_from(labels), max_size=MAX_LABELS), frames),
                          min_size=1, max_size=MAX_BATCH))  # [(target, T_n)], shrinks by dropping samples
    samples = [{"target": target, "logits": _logits(kind, scale, seed + n, T_n, C, target, blank).tolist()}
               for n, (target, T_n) in enumerate(drawn)]
    # masked classes: logit -inf (probability 0) in every frame, as a masked vocabulary gives;
    # a masked label in a target makes it infeasible (loss +inf)
    masked = draw(st.lists(st.sampled_from(labels), max_size=2, unique=True))
    for sample in samples:
        for row in sample["logits"]:
            for c in masked:
                row[c] = -math.inf
    pad_frames = draw(st.integers(0, 2))
    pad = draw(st.sampled_from(PAD_VALUES))
    T = max(len(s["logits"]) for s in samples) + pad_frames
    build = {"generator": "table", "C": C, "blank": blank, "T": T, "pad": pad, "sample": samples}
    return build, draw(st.sampled_from(tuple(dtypes)))


def size(build: dict) -> dict:
    """``T, N, C, L`` and the input lengths of a drawn problem, for messages."""
    samples = build["sample"]
    return {"T": build["T"], "N": len(samples), "C": build["C"],
            "L": max(len(s["target"]) for s in samples),
            "input_lengths": [len(s["logits"]) for s in samples], "blank": build["blank"]}
