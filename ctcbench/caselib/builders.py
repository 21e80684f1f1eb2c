"""Build a case's CTC problems from its data: generators by name, invariance transforms by name.

A generator makes each sample's valid frames ``(T_n, C)`` as float64 logits; the shared code
around it draws targets, pads to ``(T, N, C)`` and casts to the dtype under test, so the same
case gives the same numbers (up to rounding) in every dtype. A transform turns the base
problem into a variant that must give the same answer up to a known map (class permutation,
extra zero-gradient frames, scaling by an upstream gradient).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from typing import Callable

import numpy as np

from ctcbench.caselib import fields
from ctcbench.core.ctcmath import min_frames
from ctcbench.core.problem import FLOAT_DTYPES, CTCProblem
from ctcbench.core.reduction import reduction_weights


# Case problems are small, with known answers: these bound what a case file can ask for
# before anything is allocated (a typo such as T = 10**12 is an error, not a MemoryError).
MAX_FRAMES = 10**6  # T, T_n and L
MAX_CELLS = 10**8  # T * N * C logits, 800 MB in float64


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


# -- generators: (sample spec, build params, T_n, C, rng) -> (T_n, C) float64 logits -------------
def _table(sample, build, T_n, C, rng, case):
    # (T_n, C); read and checked by _frames_of, which knows the sample's index
    return sample["_table"]


def _peaked(sample, build, T_n, C, rng, case):
    if C < 2:
        fields.fail(_where(case, "C"), "an integer >= 2 for generator 'peaked' (the peak "
                    "and the rest)", C)
    path = np.asarray(sample["_path"], dtype=np.int64)
    peak = fields.number(build.get("peak", 0.9), _where(case, "peak"), lo=0, hi=1, lo_open=True)
    probs = np.full((len(path), C), (1.0 - peak) / (C - 1))  # (T_n, C)
    probs[np.arange(len(path)), path] = peak
    with np.errstate(divide="ignore"):  # peak = 1 leaves probability 0: log gives -inf
        return np.log(probs)


def _random(sample, build, T_n, C, rng, case):
    if "spread" in build:  # every frame spans exactly max - min = spread
        spread = fields.number(build["spread"], _where(case, "spread"), lo=0)
        x = rng.uniform(size=(T_n, C))  # (T_n, C)
        lo, hi = x.min(axis=1, keepdims=True), x.max(axis=1, keepdims=True)
        return (x - lo) / np.where(hi > lo, hi - lo, 1.0) * spread
    return rng.normal(size=(T_n, C)) * fields.number(build.get("scale", 2.0),
                                                     _where(case, "scale"), lo=0)


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
# the keys a [case.build] table may hold: BUILD_KEYS and its generator's own ("arrays": only
# its own); a [[case.build.sample]]: SAMPLE_KEYS and its generator's. Any other key is refused
# where it is read, so a misspelt one is never dropped.
BUILD_KEYS = ("generator", "sample", "seed", "C", "blank", "T", "pad", "pad_frames",
              "input_lengths", "target_lengths", "unbatched")
GENERATOR_KEYS = {"peaked": ("peak",), "random": ("scale", "spread"),
                  "mt19937_uniform": ("low", "high", "real", "set_class"),
                  "arrays": ("generator", "logits", "shape", "fill", "targets", "input_lengths",
                             "target_lengths", "blank", "unbatched")}
SAMPLE_KEYS = ("name", "target", "L", "no_repeats", "T", "slack")
GENERATOR_SAMPLE_KEYS = {"table": ("logits", "probs"), "peaked": ("path",)}


def _batch_draw(build: dict, shape: tuple[int, int, int], case: str) -> np.ndarray:
    """``mt19937_uniform``: the ``(T, N, C)`` tensor filled in memory order from one
    ``std::mt19937(seed)`` through ``std::uniform_real_distribution<real>(low, high)``
    (warp-ctc's ``genActs``); ``real`` is ``"double"`` (``<>``, the default) or ``"float"``."""
    from ctcbench.caselib.stdrandom import uniform_real
    T, N, C = shape
    x = uniform_real(fields.integer(build.get("seed", 0), _where(case, "seed"), lo=0), T * N * C,
                     low=fields.number(build.get("low", 0.0), _where(case, "low")),
                     high=fields.number(build.get("high", 1.0), _where(case, "high")),
                     real=fields.choice(build.get("real", "double"), _where(case, "real"),
                                        ("double", "float")))
    x = x.astype(np.float32).astype(np.float64).reshape(T, N, C)  # stored as float, as in C++
    for c, value in build.get("set_class", ()):  # e.g. warp-ctc's inf_test: class 2 = -1e30
        x[:, :, fields.integer(c, _where(case, "set_class"), lo=0, hi=C - 1)] = float(value)
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
    fields.keys(build, f"case {case!r} build", GENERATOR_KEYS["arrays"])
    for key in ("targets", "input_lengths", "target_lengths"):
        if key not in build:
            fields.fail(_where(case, key), "a value for generator 'arrays'", "nothing")
    if "logits" in build:
        logits = fields.array(build["logits"], _where(case, "logits"), integer=False)
    else:
        shape = tuple(fields.int_list(build.get("shape"), _where(case, "shape"), lo=0,
                                      hi=MAX_FRAMES))
        if math.prod(shape) > MAX_CELLS:
            fields.fail(_where(case, "shape"), f"at most {MAX_CELLS:.0e} cells (a case is a "
                        "small problem with a known answer)", list(shape))
        logits = np.full(shape, fields.number(build.get("fill", 0.0), _where(case, "fill"),
                                              finite=False))
    arr = {k: fields.array(build[k], _where(case, k), integer=True)
           for k in ("targets", "input_lengths", "target_lengths")}
    n = logits.shape[1] if logits.ndim == 3 else 1
    blank = fields.integer(build.get("blank", 0), _where(case, "blank"), lo=-2**63, hi=2**63 - 1)
    C = logits.shape[-1] if logits.ndim else 1
    return Raw(logits, arr["targets"], arr["input_lengths"], arr["target_lengths"],
               blank % C if C else blank, [f"sample{i}" for i in range(n)], blank_given=blank,
               unbatched=fields.flag(build.get("unbatched", False), _where(case, "unbatched")))


def _target(sample: dict, C: int, blank: int, rng, where: str) -> list[int]:
    if "target" in sample:
        return fields.int_list(sample["target"], f"{where}.target", lo=0, hi=C - 1, blank=blank)
    if "L" not in sample:
        raise ValueError(f"{where}: expected 'target' (labels) or 'L' (a length "
                         f"for random labels) in every sample, got keys {sorted(sample)}")
    L = fields.integer(sample["L"], f"{where}.L", lo=0, hi=MAX_FRAMES)
    labels = np.array([c for c in range(C) if c != blank])
    if L and not len(labels):
        fields.fail(f"{where}.L", f"0 when C = {C} (no label besides the blank)", L)
    target = rng.choice(labels, size=L)
    if fields.flag(sample.get("no_repeats", False), f"{where}.no_repeats") and len(labels) > 1:
        for i in range(1, L):
            while target[i] == target[i - 1]:
                target[i] = rng.choice(labels)
    return [int(k) for k in target]


def _frames_of(sample: dict, generator: str, C: int, target: list[int], where: str):
    """(sample with its checked table or path, T_n): the sample's frame count and the data
    its generator reads, each field checked and named."""
    sample = dict(sample)
    given_T = sample.get("T", "min")
    if given_T != "min":
        given_T = fields.integer(given_T, f"{where}.T", lo=0, hi=MAX_FRAMES)
    if generator == "table":
        if "logits" not in sample and "probs" not in sample:
            fields.fail(where, "'probs' or 'logits' (a T_n x C table) for generator 'table'",
                        f"keys {sorted(sample)}")
        key = "logits" if "logits" in sample else "probs"
        x = fields.table(sample[key], f"{where}.{key}", width=C)  # (T_n, C)
        if key == "probs":
            if not (np.isfinite(x) & (x >= 0) & (x <= 1)).all():
                fields.fail(f"{where}.probs", "probabilities in [0, 1]",
                            sorted(set(x[~((x >= 0) & (x <= 1))].tolist()))[:5])
            with np.errstate(divide="ignore"):  # probability 0 is log-probability -inf
                x = np.log(x)
        sample["_table"], T_n = x, len(x)
    elif generator == "peaked":
        if "path" not in sample:
            fields.fail(f"{where}.path", "a list of classes (the peak of each frame) for "
                        "generator 'peaked'", "nothing")
        sample["_path"] = fields.int_list(sample["path"], f"{where}.path", lo=0, hi=C - 1)
        T_n = len(sample["_path"])
    elif given_T == "min":
        T_n = min_frames(target) + fields.integer(sample.get("slack", 0), f"{where}.slack", lo=0)
    else:
        T_n = given_T
    if given_T != "min" and given_T != T_n:
        fields.fail(f"{where}.T", f"{T_n} (the frames its table or path has) or no T", given_T)
    return sample, T_n


def build_raw(build: dict, *, case: str = "?") -> Raw:
    """The base problem of a case, in float64, from its ``[case.build]`` table."""
    if not isinstance(build, dict):
        fields.fail(f"case {case!r} build", "a table", repr(build))
    if build.get("generator") == "arrays":
        return _arrays(build, case)
    name = fields.choice(build.get("generator"), _where(case, "generator"), tuple(GENERATORS))
    fields.keys(build, f"case {case!r} build", BUILD_KEYS + GENERATOR_KEYS.get(name, ()))
    gen = GENERATORS[name]
    samples = build.get("sample")
    if not isinstance(samples, list) or not samples:
        raise ValueError(f"{_where(case, 'sample')}: expected a non-empty list of samples, "
                         f"got {samples!r}")
    rng = np.random.default_rng(fields.integer(build.get("seed", 0), _where(case, "seed"), lo=0))
    C = build.get("C")
    if C is None and isinstance(samples[0], dict):  # tables carry their width
        first = samples[0].get("probs", samples[0].get("logits"))
        C = len(first[0]) if isinstance(first, list) and first and isinstance(first[0], list) \
            else None
    C = fields.integer(C, _where(case, "C"), lo=1)
    blank_given = fields.integer(build.get("blank", 0), _where(case, "blank"), lo=-C, hi=C - 1)
    blank = blank_given % C  # -1 means the last class, as in TensorFlow
    targets, frames, names = [], [], []
    for n, sample in enumerate(samples):
        where = _where(case, f"sample[{n}]")
        if not isinstance(sample, dict):
            fields.fail(where, "a table", repr(sample))
        fields.keys(sample, where, SAMPLE_KEYS + GENERATOR_SAMPLE_KEYS.get(name, ()))
        target = _target(sample, C, blank, rng, where)
        sample, T_n = _frames_of(sample, build["generator"], C, target, where)
        x = gen(sample, build, T_n, C, rng, case)
        if x.ndim != 2 or x.shape[1] != C:
            raise ValueError(f"{_where(case, 'sample')}[{n}]: expected frames of width C={C}, "
                             f"got shape {x.shape}")
        targets.append(target)
        frames.append(x)
        names.append(str(sample.get("name", f"sample{n}")))
    lengths = np.array([len(f) for f in frames], dtype=np.int64)
    longest = int(lengths.max(initial=0))
    extra = fields.integer(build.get("pad_frames", 0), _where(case, "pad_frames"), lo=0)
    T = fields.integer(build.get("T", longest + extra), _where(case, "T"), lo=longest,
                       hi=MAX_FRAMES)
    if T * len(frames) * C > MAX_CELLS:
        fields.fail(_where(case, "T"), f"T * N * C <= {MAX_CELLS:.0e} (a case is a small "
                    f"problem with a known answer)", f"{T} * {len(frames)} * {C}")
    pad = fields.number(build.get("pad", 0.0), _where(case, "pad"), finite=False)
    logits = np.full((T, len(frames), C), pad)  # (T, N, C)
    for n, f in enumerate(frames):
        logits[: len(f), n] = f
    if build["generator"] == "mt19937_uniform":
        logits = _batch_draw(build, logits.shape, case)
    elif build["generator"] == "numpy_normal":
        logits = _numpy_normal(build, logits.shape)
    L = max((len(t) for t in targets), default=0)
    padded = np.full((len(targets), max(L, 1)), blank, dtype=np.int64)  # (N, L)
    for n, t in enumerate(targets):
        padded[n, : len(t)] = t
    target_lengths = np.array([len(t) for t in targets], dtype=np.int64)
    # overrides, e.g. lengths the API must refuse
    if "input_lengths" in build:
        lengths = np.asarray(fields.int_list(build["input_lengths"], _where(case, "input_lengths"),
                                             lo=-MAX_FRAMES, hi=MAX_FRAMES), dtype=np.int64)
    if "target_lengths" in build:
        target_lengths = np.asarray(fields.int_list(build["target_lengths"],
                                                    _where(case, "target_lengths"),
                                                    lo=-MAX_FRAMES, hi=MAX_FRAMES), dtype=np.int64)
    unbatched = build.get("unbatched", False)
    if not isinstance(unbatched, bool):
        fields.fail(_where(case, "unbatched"), "true or false", repr(unbatched))
    if unbatched and len(frames) != 1:
        raise ValueError(f"{_where(case, 'unbatched')}: expected one sample, got {len(frames)}")
    return Raw(logits, padded, lengths, target_lengths, blank, names, blank_given, unbatched)


def to_problem(raw: Raw, dtype: str) -> CTCProblem:
    """Cast to ``dtype`` (bfloat16 goes through torch, as NumPy has none) and validate."""
    fields.choice(dtype, "dtype", FLOAT_DTYPES)
    if dtype == "bfloat16":
        import torch
        logits = torch.from_numpy(raw.logits).to(torch.bfloat16)
    else:
        with np.errstate(over="ignore"):  # 1e30 padding is inf in float16: padding, ignored
            logits = raw.logits.astype(dtype)
    targets, input_lengths, target_lengths = raw.targets, raw.input_lengths, raw.target_lengths
    if raw.unbatched and logits.ndim == 3:  # one sample in torch's unbatched form
        logits, targets = logits[:, 0], targets.reshape(-1)  # (T, C), (L,)
        input_lengths, target_lengths = input_lengths.reshape(-1)[0], target_lengths.reshape(-1)[0]
    blank = raw.blank if raw.blank_given is None else raw.blank_given
    return CTCProblem(logits, targets, input_lengths, target_lengths, blank=blank)


def problem_of(build: dict, dtype: str, *, case: str = "drawn") -> CTCProblem:
    """The problem a ``[case.build]`` table makes (a case file's, or one that fuzz or the
    datasheet drew), in ``dtype``; ``case`` names it in an error."""
    return to_problem(build_raw(build, case=case), dtype)


# -- transforms: (raw, params) -> (raw', map from the base gradient to this variant's, run kwargs)
@dataclass
class Variant:
    """One problem of a case and how its answer follows from the base answer."""

    label: str
    raw: Raw
    grad_map: Callable[[np.ndarray], np.ndarray] = lambda g: g  # (T, N, C) base -> variant
    run_kwargs: dict = field(default_factory=dict)


def _move_blank(raw: Raw, p: dict, where: str) -> Variant:
    C = raw.logits.shape[2]
    new_blank = fields.integer(p.get("blank", -1), f"{where}.blank", lo=-C, hi=C - 1) % C
    order = [c for c in range(C) if c != raw.blank]
    order.insert(new_blank, raw.blank)  # new class j is old class order[j]
    new_index = np.argsort(order)  # old class c -> new index
    targets = new_index[raw.targets]
    return Variant(f"blank={new_blank}", replace(raw, logits=raw.logits[..., order],
                                                    targets=targets, blank=new_blank,
                                                    blank_given=None),
                   lambda g: g[..., order])


def _concatenated(raw: Raw, p: dict, where: str) -> Variant:
    L = raw.targets.shape[1]
    flat = raw.targets[np.arange(L)[None, :] < raw.target_lengths[:, None]]  # (sum L_n,)
    return Variant("concatenated", replace(raw, targets=flat))


def _wide_padding(raw: Raw, p: dict, where: str) -> Variant:
    extra = fields.integer(p.get("extra", 7), f"{where}.extra", lo=0)
    fill = fields.integer(p.get("fill", (raw.blank + 1) % raw.logits.shape[2]),  # a real label
                          f"{where}.fill", lo=-2**31, hi=2**31 - 1)  # as garbage
    targets = np.full((raw.targets.shape[0], raw.targets.shape[1] + extra), fill, np.int64)
    L = raw.targets.shape[1]
    valid = np.arange(L)[None, :] < raw.target_lengths[:, None]
    targets[:, :L] = np.where(valid, raw.targets, fill)
    return Variant(f"padded+{extra}", replace(raw, targets=targets))


def _index_dtype(raw: Raw, p: dict, where: str) -> Variant:
    dtype = fields.choice(p.get("dtype", "int32"), f"{where}.dtype", ("int32", "int64"))
    return Variant(dtype, replace(raw, targets=raw.targets.astype(dtype),
                                  input_lengths=raw.input_lengths.astype(dtype),
                                  target_lengths=raw.target_lengths.astype(dtype)))


def _padded_frames(raw: Raw, p: dict, where: str) -> Variant:
    value = fields.number(p.get("value", float("nan")), f"{where}.value", finite=False)
    extra = fields.integer(p.get("extra", 0), f"{where}.extra", lo=0)
    T, N, C = raw.logits.shape
    logits = np.full((T + extra, N, C), value)  # (T', N, C)
    valid = np.arange(T)[:, None] < raw.input_lengths[None, :]  # (T, N)
    logits[:T] = np.where(valid[..., None], raw.logits, value)
    zeros = np.zeros((extra, N, C))
    return Variant(f"pad={value:g}" + (f"+{extra}" if extra else ""), replace(raw, logits=logits),
                   lambda g: np.concatenate([g, zeros], axis=0))


def _upstream_weights(raw: Raw, p: dict, where: str) -> Variant:
    N = len(raw.target_lengths)
    if "weights" in p:
        w = p["weights"]
        if not isinstance(w, list) or len(w) != N:
            fields.fail(f"{where}.weights", f"a list of {N} numbers (one per sample)", repr(w))
        w = np.array([fields.number(x, f"{where}.weights[{i}]") for i, x in enumerate(w)])
    else:
        reduction = fields.choice(p.get("reduction", "mean"), f"{where}.reduction",
                                  ("mean", "sum", "none"))
        w = reduction_weights(raw.target_lengths, reduction)
    w = w * fields.number(p.get("scale", 1.0), f"{where}.scale")  # (N,)
    label = "weights=" + ",".join(f"{x:.3g}" for x in w)
    return Variant(label, raw, lambda g: g * w[None, :, None], {"grad_weights": w})


# (raw, params, where) -> Variant; ``where`` names the variant's table in errors
TRANSFORMS: dict[str, Callable[[Raw, dict, str], Variant]] = {
    "move_blank": _move_blank,
    "concatenated_targets": _concatenated,
    "wide_padding": _wide_padding,
    "index_dtype": _index_dtype,
    "padded_frames": _padded_frames,
    "upstream_weights": _upstream_weights,
}
TRANSFORM_KEYS = {"move_blank": ("blank",), "wide_padding": ("extra", "fill"),
                  "index_dtype": ("dtype",), "padded_frames": ("value", "extra"),
                  "upstream_weights": ("weights", "reduction", "scale")}  # beside transform, also


def variants(build: dict, transforms=(), *, case: str = "?") -> list[Variant]:
    """The base problem first, then one variant per ``[[case.variant]]`` entry."""
    base = build_raw(build, case=case)
    out = [Variant("base", base)]
    for i, spec in enumerate(transforms):
        where = f"case {case!r} variant[{i}]"
        v = _apply(base, spec, where)
        also = spec.get("also", [])
        if not isinstance(also, list):
            fields.fail(f"{where}.also", "a list of variant tables", repr(also))
        for j, more in enumerate(also):  # composed transforms, applied in order
            w = _apply(v.raw, more, f"{where}.also[{j}]")
            v = Variant(f"{v.label}+{w.label}", w.raw,
                        lambda g, f=v.grad_map, h=w.grad_map: h(f(g)),
                        {**v.run_kwargs, **w.run_kwargs})
        out.append(v)
    return out


def _apply(raw: Raw, spec: dict, where: str) -> Variant:
    if not isinstance(spec, dict):
        fields.fail(where, "a table with a transform", repr(spec))
    name = fields.choice(spec.get("transform"), f"{where}.transform", tuple(TRANSFORMS))
    fields.keys(spec, where, ("transform", "also") + TRANSFORM_KEYS.get(name, ()))
    params = {k: v for k, v in spec.items() if k not in ("transform", "also")}
    return TRANSFORMS[name](raw, params, where)
