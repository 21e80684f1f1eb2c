"""Hypothesis strategies for CTC problems, drawn as case-file ``[case.build]`` tables.

A drawn problem is the same dict a case file holds, so a failing one is written out as a case
that ``ctcbench compare --cases`` rebuilds bit for bit. Every choice shrinks toward the simplest
problem: one sample, few classes, blank 0, short targets, few frames, uniform logits, no padding,
no masked (-inf) classes. Drawn: blank anywhere, repeats, padding garbage (0, NaN, 1e30), logit
scales 1 to 1e3, inputs up to 3000 frames (float64 underflow), empty and infeasible targets.

:func:`boundary_builds` draws problems with one size at a limit real kernels have (target
lengths to 1100, frames to 1e4, classes to 32769, batches to 70, ragged batches), each near a
power of two or a documented limit, within a cost cap (:func:`work`); docs/fuzz.md says why.
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
# certain: the alignment's logit at ``scale``, 0 elsewhere, no noise: a loss near 0, where
# optax's float32 loss goes below 0 (google-deepmind/optax#1771)
LOGIT_KINDS = ("uniform", "normal", "peaked", "certain")
SCALES = (1.0, 4.0, 30.0, 1e3)


def _logits(kind: str, scale: float, seed: int, T_n: int, C: int, target: list[int], blank: int):
    """``(T_n, C)`` float64 logits of one sample."""
    rng = np.random.default_rng(seed)
    if kind == "uniform":
        return np.zeros((T_n, C))
    x = np.zeros((T_n, C)) if kind == "certain" else rng.normal(size=(T_n, C)) * scale  # (T_n, C)
    if kind in ("peaked", "certain") and T_n:  # an alignment: labels spread out, blanks between
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
            "input_lengths": [_frames(s) for s in samples], "blank": build["blank"]}


# -- problems at the sizes where real kernels switch paths or overflow buffers ----------------
def _around(values, lo: int, hi: int) -> tuple[int, ...]:
    """Each value and its neighbours (v - 1, v, v + 1) within [lo, hi], ascending."""
    return tuple(sorted({v + d for v in values for d in (-1, 0, 1) if lo <= v + d <= hi}))


POWERS = tuple(2**k for k in range(1, 16))
MAX_BIG_LABELS = 1100  # past torch's CUDA limits (896 double, 1024 float; pytorch#27442)
MAX_BIG_FRAMES = 10_000
MAX_BIG_BATCH = 70  # past warps of 32 and 64
MAX_BIG_CLASSES = 32_769  # labels up to 32768: past int16
# target lengths: powers of two (cuDNN at L = 256, pytorch#53505), warp-ctc's 639 labels, torch's
# 896 / 1024; 2L + 1 lands around the buffer sizes 2**k
BIG_LABELS = _around(POWERS + (639, 896), 0, MAX_BIG_LABELS)
BIG_FRAMES = _around(POWERS + (1000, 10_000), 1, MAX_BIG_FRAMES)
BIG_BATCH = _around(POWERS + (1,), 1, MAX_BIG_BATCH)
BIG_CLASSES = _around(POWERS + (28, 29, 1000, 5000), 2, MAX_BIG_CLASSES)  # uint8 / int16 edges
WORK_CAP = 4_000_000  # sum over samples of T_n * (2 L_n + 1 + C): about 0.1 s for the oracles
FOCUS = ("L", "T", "C", "N", "ragged")
BIG_SCALES = (0.0, 1.0, 4.0, 30.0)  # 0: uniform logits


def _sized(draw, values, hi: int):
    """An integer at or next to one of ``values`` (most draws) or anywhere in [values[0], hi];
    either way it shrinks toward the smallest one that still fails."""
    if draw(st.booleans()):
        return draw(st.integers(values[0], hi))
    return draw(st.sampled_from(values))


def work(build: dict) -> int:
    """What one problem costs the oracles: the sum over samples of ``T_n * (2 L_n + 1 + C)``."""
    C = build["C"]
    return sum(_frames(s) * (2 * len(s["target"]) + 1 + C) for s in build["sample"])


def _frames(sample: dict) -> int:
    return len(sample["logits"]) if "logits" in sample else int(sample["T"])


@st.composite
def boundary_builds(draw, dtypes=("float64",)) -> tuple[dict, str]:
    """(a ``[case.build]`` table of generator ``random``, a dtype): one size pushed to a limit
    real kernels have (``FOCUS``: target length, frames, classes, batch, or a ragged batch of
    tiny and large samples), the others small enough that ``work`` stays under ``WORK_CAP``.
    The logits are drawn from ``seed`` by the case builder, so a case file stays small."""
    focus = draw(st.sampled_from(FOCUS))
    L = _sized(draw, BIG_LABELS, MAX_BIG_LABELS) if focus == "L" else draw(st.integers(0, 8))
    C = (_sized(draw, BIG_CLASSES, MAX_BIG_CLASSES) if focus == "C"
         else draw(st.sampled_from((2, 3, 5, 28, 29, 257))))
    N = (_sized(draw, BIG_BATCH, MAX_BIG_BATCH) if focus in ("N", "ragged")
         else draw(st.integers(1, 3)))
    T = _sized(draw, BIG_FRAMES, MAX_BIG_FRAMES) if focus == "T" else None
    blank = draw(st.sampled_from((0, C - 1)))
    # frames past the target's need; -1: one too few (infeasible, pytorch PR#130071)
    slack = draw(st.sampled_from((0, 1, 2, 5, 64, -1)))
    seed = draw(st.integers(0, 2**16))
    rng = np.random.default_rng(seed)
    labels = np.array([c for c in range(C) if c != blank])
    # labels next to the int8/uint8/int16 edges and the top class, where a narrow type wraps
    hot = [c for c in (127, 128, 255, 256, 32767, 32768, C - 1) if c < C and c != blank]
    samples = []
    for n in range(N):
        L_n = L if n == 0 or focus != "ragged" else int(rng.choice([0, 1, L,
                                                                   rng.integers(0, L + 1)]))
        if focus == "ragged" and n and rng.random() < 0.5:
            L_n = min(L_n, 2)
        target = rng.choice(labels, size=L_n) if len(labels) else np.zeros(0, np.int64)
        if hot and L_n:
            spots = rng.integers(0, L_n, size=max(1, L_n // 8))
            target[spots] = rng.choice(hot, size=len(spots))
        need = L_n + int((target[1:] == target[:-1]).sum())
        T_n = max(0, need + slack) if T is None else T
        if focus == "ragged" and n and rng.random() < 0.3:
            T_n = need
        samples.append({"target": [int(k) for k in target], "T": int(T_n)})
    while len(samples) > 1 and work({"C": C, "sample": samples}) > WORK_CAP:
        samples.pop()  # the batch gives way first, the drawn boundary stays
    for s in samples:  # then the frames
        s["T"] = int(min(s["T"], WORK_CAP // (2 * len(s["target"]) + 1 + C)))
    pad_frames = draw(st.integers(0, 2))
    build = {"generator": "random", "seed": seed, "scale": draw(st.sampled_from(BIG_SCALES)),
             "C": C, "blank": blank, "T": max(s["T"] for s in samples) + pad_frames,
             "pad": draw(st.sampled_from(PAD_VALUES)), "sample": samples}
    return build, draw(st.sampled_from(tuple(dtypes)))
