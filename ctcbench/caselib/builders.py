"""Build a case's CTC problems from its data: generators by name, invariance transforms by name.

A generator makes each sample's valid frames ``(T_n, C)`` as float64 logits; the shared code
around it draws targets, pads to ``(T, N, C)`` and casts to the dtype under test, so the same
case gives the same numbers (up to rounding) in every dtype. A transform turns the base
problem into a variant that must give the same answer up to a known map (class permutation,
extra zero-gradient frames, scaling by an upstream gradient).
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ctcbench.core.ctcmath import min_frames
from ctcbench.core.problem import CTCProblem
from ctcbench.core.reduction import reduction_weights


@dataclass
class Raw:
    """A problem before the dtype cast: float64 logits and the targets in the caller's form."""

    logits: np.ndarray  # (T, N, C) float64
    targets: np.ndarray  # (N, L) padded, or (sum L_n,) concatenated
    input_lengths: np.ndarray  # (N,)
    target_lengths: np.ndarray  # (N,)
    blank: int  # in [0, C)
    names: list[str]  # one per sample
    blank_given: int | None = None  # as the case wrote it (e.g. -1), handed to the API
    unbatched: bool = False  # hand the API (T, C) logits, (L,) targets, scalar lengths


def _where(case_name: str, key: str) -> str:
    return f"case {case_name!r} build.{key}"


def _req(spec: dict, key: str, case_name: str):
    if key not in spec:
        raise ValueError(f"{_where(case_name, key)}: expected a value, got nothing")
    return spec[key]


# -- generators: (sample spec, build params, T_n, C, rng) -> (T_n, C) float64 logits -------------
def _table(sample, build, T_n, C, rng, case):
    if "logits" in sample:
        x = np.asarray(sample["logits"], dtype=np.float64)
    elif "probs" in sample:
        x = np.log(np.asarray(sample["probs"], dtype=np.float64))
    else:
        raise ValueError(f"{_where(case, 'sample')}: expected 'probs' or 'logits' per sample, "
                         f"got keys {sorted(sample)}")
    return x.reshape(0, C) if x.size == 0 else x  # (T_n, C); an empty table is zero frames


def _peaked(sample, build, T_n, C, rng, case):
    path = np.asarray(_req(sample, "path", case), dtype=np.int64)
    peak = float(build.get("peak", 0.9))
    probs = np.full((len(path), C), (1.0 - peak) / (C - 1))  # (T_n, C)
    probs[np.arange(len(path)), path] = peak
    return np.log(probs)


def _random(sample, build, T_n, C, rng, case):
    if "spread" in build:  # every frame spans exactly max - min = spread
        x = rng.uniform(size=(T_n, C))  # (T_n, C)
        lo, hi = x.min(axis=1, keepdims=True), x.max(axis=1, keepdims=True)
        return (x - lo) / np.where(hi > lo, hi - lo, 1.0) * float(build["spread"])
    return rng.normal(size=(T_n, C)) * float(build.get("scale", 2.0))


def _uniform(sample, build, T_n, C, rng, case):
    return np.zeros((T_n, C))


GENERATORS: dict[str, Callable] = {
    "table": _table,
    "peaked": _peaked,
    "random": _random,
    "uniform": _uniform,
    "mt19937_uniform": _uniform,  # per-sample zeros; the whole batch is drawn by _batch_draw
    "numpy_normal": _uniform,  # per-sample zeros; the whole batch is drawn by _numpy_normal
    "arrays": None,  # the whole problem as arrays in the build table, see _arrays
}


def _batch_draw(build: dict, shape: tuple[int, int, int]) -> np.ndarray:
    """``mt19937_uniform``: the ``(T, N, C)`` tensor filled in memory order from one
    ``std::mt19937(seed)`` through ``std::uniform_real_distribution<real>(low, high)``
    (warp-ctc's ``genActs``); ``real`` is ``"double"`` (``<>``, the default) or ``"float"``."""
    from ctcbench.caselib.stdrandom import uniform_real
    T, N, C = shape
    x = uniform_real(int(build.get("seed", 0)), T * N * C, low=float(build.get("low", 0.0)),
                     high=float(build.get("high", 1.0)), real=str(build.get("real", "double")))
    x = x.astype(np.float32).astype(np.float64).reshape(T, N, C)  # stored as float, as in C++
    for c, value in build.get("set_class", ()):  # e.g. warp-ctc's inf_test: class 2 = -1e30
        x[:, :, int(c)] = float(value)
    return x


def _numpy_normal(build: dict, shape: tuple[int, int, int]) -> np.ndarray:
    """``numpy_normal``: ``np.random.seed(seed)`` then ``np.random.randn(N, T, C)``, NumPy's
    legacy global stream drawn batch-major as optax's tests draw it, returned as ``(T, N, C)``."""
    T, N, C = shape
    x = np.random.RandomState(int(build.get("seed", 0))).standard_normal((N, T, C))  # (N, T, C)
    return x.transpose(1, 0, 2)  # (T, N, C)


def _arrays(build: dict, case: str) -> Raw:
    """``arrays``: ``logits`` as a nested list (any rank, or ``shape`` + ``fill``), ``targets``,
    ``input_lengths``, ``target_lengths``, ``blank`` given whole, unchecked, so a case can
    hand the API exactly the malformed input it must refuse."""
    if "logits" in build:
        logits = np.asarray(build["logits"], dtype=np.float64)
    else:
        logits = np.full(tuple(_req(build, "shape", case)), float(build.get("fill", 0.0)))
    arr = {k: np.asarray(_req(build, k, case), dtype=np.int64)
           for k in ("targets", "input_lengths", "target_lengths")}
    n = logits.shape[1] if logits.ndim == 3 else 1
    blank = int(build.get("blank", 0))
    C = logits.shape[-1] if logits.ndim else 1
    return Raw(logits, arr["targets"], arr["input_lengths"], arr["target_lengths"],
               blank % C if C else blank, [f"sample{i}" for i in range(n)], blank_given=blank,
               unbatched=bool(build.get("unbatched", False)))


def _target(sample: dict, C: int, blank: int, rng, case: str) -> list[int]:
    if "target" in sample:
        return [int(k) for k in sample["target"]]
    if "L" not in sample:
        raise ValueError(f"{_where(case, 'sample')}: expected 'target' (labels) or 'L' (a length "
                         f"for random labels) in every sample, got keys {sorted(sample)}")
    L = int(sample["L"])
    labels = np.array([c for c in range(C) if c != blank])
    target = rng.choice(labels, size=L)
    if sample.get("no_repeats", False) and len(labels) > 1:
        for i in range(1, L):
            while target[i] == target[i - 1]:
                target[i] = rng.choice(labels)
    return [int(k) for k in target]


def build_raw(build: dict, *, case: str = "?") -> Raw:
    """The base problem of a case, in float64, from its ``[case.build]`` table."""
    if build["generator"] == "arrays":
        return _arrays(build, case)
    gen = GENERATORS[build["generator"]]
    samples = build.get("sample")
    if not isinstance(samples, list) or not samples:
        raise ValueError(f"{_where(case, 'sample')}: expected a non-empty list of samples, "
                         f"got {samples!r}")
    rng = np.random.default_rng(int(build.get("seed", 0)))
    blank = int(build.get("blank", 0))
    C = build.get("C")
    if C is None:  # tables carry their width
        first = samples[0].get("probs", samples[0].get("logits"))
        C = len(first[0]) if first else None
    if not isinstance(C, int) or C < 1:
        raise ValueError(f"{_where(case, 'C')}: expected a positive int, got {C!r}")
    blank_given, blank = blank, blank % C  # -1 means the last class, as in TensorFlow
    targets, frames, names = [], [], []
    for n, sample in enumerate(samples):
        target = _target(sample, C, blank, rng, case)
        T_n = sample.get("T", "min")
        if "path" in sample:
            T_n = len(sample["path"])
        elif "probs" in sample or "logits" in sample:
            T_n = len(sample.get("probs", sample.get("logits")))
        elif T_n == "min":
            T_n = min_frames(target) + int(sample.get("slack", 0))
        x = gen(sample, build, int(T_n), C, rng, case)
        if x.ndim != 2 or x.shape[1] != C:
            raise ValueError(f"{_where(case, 'sample')}[{n}]: expected frames of width C={C}, "
                             f"got shape {x.shape}")
        targets.append(target)
        frames.append(x)
        names.append(str(sample.get("name", f"sample{n}")))
    lengths = np.array([len(f) for f in frames], dtype=np.int64)
    T = int(build.get("T", lengths.max(initial=0) + int(build.get("pad_frames", 0))))
    pad = float(build.get("pad", 0.0))
    logits = np.full((T, len(frames), C), pad)  # (T, N, C)
    for n, f in enumerate(frames):
        logits[: len(f), n] = f
    if build["generator"] == "mt19937_uniform":
        logits = _batch_draw(build, logits.shape)
    elif build["generator"] == "numpy_normal":
        logits = _numpy_normal(build, logits.shape)
    L = max((len(t) for t in targets), default=0)
    padded = np.full((len(targets), max(L, 1)), blank, dtype=np.int64)  # (N, L)
    for n, t in enumerate(targets):
        padded[n, : len(t)] = t
    target_lengths = np.array([len(t) for t in targets], dtype=np.int64)
    # overrides, e.g. lengths the API must refuse
    lengths = np.asarray(build.get("input_lengths", lengths), dtype=np.int64)
    target_lengths = np.asarray(build.get("target_lengths", target_lengths), dtype=np.int64)
    unbatched = bool(build.get("unbatched", False))
    if unbatched and len(frames) != 1:
        raise ValueError(f"{_where(case, 'unbatched')}: expected one sample, got {len(frames)}")
    return Raw(logits, padded, lengths, target_lengths, blank, names, blank_given, unbatched)


def to_problem(raw: Raw, dtype: str) -> CTCProblem:
    """Cast to ``dtype`` (bfloat16 goes through torch, as NumPy has none) and validate."""
    if dtype == "bfloat16":
        import torch
        logits = torch.from_numpy(raw.logits).to(torch.bfloat16)
    else:
        logits = raw.logits.astype(dtype)
    targets, input_lengths, target_lengths = raw.targets, raw.input_lengths, raw.target_lengths
    if raw.unbatched and logits.ndim == 3:  # one sample in torch's unbatched form
        logits, targets = logits[:, 0], targets.reshape(-1)  # (T, C), (L,)
        input_lengths, target_lengths = input_lengths.reshape(-1)[0], target_lengths.reshape(-1)[0]
    blank = raw.blank if raw.blank_given is None else raw.blank_given
    return CTCProblem(logits, targets, input_lengths, target_lengths, blank=blank)


# -- transforms: (raw, params) -> (raw', map from the base gradient to this variant's, run kwargs)
@dataclass
class Variant:
    """One problem of a case and how its answer follows from the base answer."""

    label: str
    raw: Raw
    grad_map: Callable[[np.ndarray], np.ndarray] = lambda g: g  # (T, N, C) base -> variant
    run_kwargs: dict = field(default_factory=dict)


def _move_blank(raw: Raw, p: dict) -> Variant:
    C = raw.logits.shape[2]
    new_blank = int(p.get("blank", -1)) % C
    order = [c for c in range(C) if c != raw.blank]
    order.insert(new_blank, raw.blank)  # new class j is old class order[j]
    new_index = np.argsort(order)  # old class c -> new index
    targets = new_index[raw.targets]
    return Variant(f"blank={new_blank}", replace(raw, logits=raw.logits[..., order],
                                                    targets=targets, blank=new_blank,
                                                    blank_given=None),
                   lambda g: g[..., order])


def _concatenated(raw: Raw, p: dict) -> Variant:
    L = raw.targets.shape[1]
    flat = raw.targets[np.arange(L)[None, :] < raw.target_lengths[:, None]]  # (sum L_n,)
    return Variant("concatenated", replace(raw, targets=flat))


def _wide_padding(raw: Raw, p: dict) -> Variant:
    extra = int(p.get("extra", 7))
    fill = int(p.get("fill", (raw.blank + 1) % raw.logits.shape[2]))  # a real label as garbage
    targets = np.full((raw.targets.shape[0], raw.targets.shape[1] + extra), fill, np.int64)
    L = raw.targets.shape[1]
    valid = np.arange(L)[None, :] < raw.target_lengths[:, None]
    targets[:, :L] = np.where(valid, raw.targets, fill)
    return Variant(f"padded+{extra}", replace(raw, targets=targets))


def _index_dtype(raw: Raw, p: dict) -> Variant:
    dtype = str(p.get("dtype", "int32"))
    return Variant(dtype, replace(raw, targets=raw.targets.astype(dtype),
                                  input_lengths=raw.input_lengths.astype(dtype),
                                  target_lengths=raw.target_lengths.astype(dtype)))


def _padded_frames(raw: Raw, p: dict) -> Variant:
    value, extra = float(p.get("value", np.nan)), int(p.get("extra", 0))
    T, N, C = raw.logits.shape
    logits = np.full((T + extra, N, C), value)  # (T', N, C)
    valid = np.arange(T)[:, None] < raw.input_lengths[None, :]  # (T, N)
    logits[:T] = np.where(valid[..., None], raw.logits, value)
    zeros = np.zeros((extra, N, C))
    return Variant(f"pad={value:g}" + (f"+{extra}" if extra else ""), replace(raw, logits=logits),
                   lambda g: np.concatenate([g, zeros], axis=0))


def _upstream_weights(raw: Raw, p: dict) -> Variant:
    if "weights" in p:
        w = np.asarray(p["weights"], dtype=np.float64)
    else:
        w = reduction_weights(raw.target_lengths, str(p.get("reduction", "mean")))
    w = w * float(p.get("scale", 1.0))  # (N,)
    label = "weights=" + ",".join(f"{x:.3g}" for x in w)
    return Variant(label, raw, lambda g: g * w[None, :, None], {"grad_weights": w})


TRANSFORMS: dict[str, Callable[[Raw, dict], Variant]] = {
    "move_blank": _move_blank,
    "concatenated_targets": _concatenated,
    "wide_padding": _wide_padding,
    "index_dtype": _index_dtype,
    "padded_frames": _padded_frames,
    "upstream_weights": _upstream_weights,
}


def variants(build: dict, transforms=(), *, case: str = "?") -> list[Variant]:
    """The base problem first, then one variant per ``[[case.variant]]`` entry."""
    base = build_raw(build, case=case)
    out = [Variant("base", base)]
    for spec in transforms:
        v = _apply(base, spec)
        for more in spec.get("also", ()):  # composed transforms, applied in order
            w = _apply(v.raw, more)
            v = Variant(f"{v.label}+{w.label}", w.raw,
                        lambda g, f=v.grad_map, h=w.grad_map: h(f(g)),
                        {**v.run_kwargs, **w.run_kwargs})
        out.append(v)
    return out


def _apply(raw: Raw, spec: dict) -> Variant:
    params = {k: v for k, v in spec.items() if k not in ("transform", "also")}
    return TRANSFORMS[spec["transform"]](raw, params)
