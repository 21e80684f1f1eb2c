"""Parse the user's tensors into :class:`Inputs`, as given: nothing is corrected here.

Shape letters as in :mod:`ctcbench.core.problem`: ``T`` frames, ``N`` batch, ``C`` classes
(blank included), ``L`` padded target width. The one thing :func:`prepare` does decide is the
layout: a batch-major array passed as time-major is turned round and reported.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctcbench.core.ctcmath import min_frames
from ctcbench.core.arrays import to_numpy
from ctcbench.core.layouts import LAYOUTS
from ctcbench.core.reduction import REDUCTIONS
from ctcbench.doctor.config import DEFAULTS
from ctcbench.doctor.findings import MAX_LISTED, Code, Finding
from ctcbench.errors import expect


@dataclass
class Inputs:
    """The user's tensors, parsed but not corrected.

    x: ``(T, N, C)`` float64 values as given (after the layout was made time-major).
    targets: ``(N, L)`` int64, padded; labels past ``target_lengths`` are not looked at.
    input_lengths, target_lengths: ``(N,)`` int64 as given (may exceed ``T`` or ``L``).
    """

    x: np.ndarray
    kind: str
    dtype: str
    targets: np.ndarray
    input_lengths: np.ndarray
    target_lengths: np.ndarray
    blank: int
    layout: str
    reduction: str
    transposed: bool  # the layout check turned (N, T, C) into (T, N, C)
    given_axes: str = ""  # the axes as given ("NCT") when the doctor read them in another order

    @property
    def shape(self) -> tuple[int, int, int, int]:
        T, N, C = self.x.shape
        return T, N, C, self.targets.shape[1]

    @property
    def lengths(self) -> np.ndarray:
        """``(N,)`` input lengths clipped to ``T``: the frames a loss can really use."""
        return np.minimum(self.input_lengths, self.x.shape[0])

    @property
    def frame_mask(self) -> np.ndarray:
        """``(T, N)`` bool, True on valid frames."""
        return np.arange(self.x.shape[0])[:, None] < self.lengths[None, :]

    @property
    def label_mask(self) -> np.ndarray:
        """``(N, L)`` bool, True on labels inside ``target_lengths``."""
        L = self.targets.shape[1]
        return np.arange(L)[None, :] < np.minimum(self.target_lengths, L)[:, None]

    def needed_frames(self) -> np.ndarray:
        """``(N,)`` frames each target needs: its length plus its adjacent repeats."""
        L = self.targets.shape[1]
        return min_frames(self.targets, np.minimum(self.target_lengths, L))


def _int_array(x, name: str) -> np.ndarray:
    arr, dtype = to_numpy(x, name)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    expect(arr.dtype.kind in "iu", name, "an integer array", f"dtype {dtype}")
    return arr.astype(np.int64)


def prepare(log_probs=None, *, logits=None, probs=None, targets, input_lengths, target_lengths,
            blank: int = 0, reduction: str = DEFAULTS.reduction,
            layout: str = DEFAULTS.layout) -> tuple[Inputs, list]:
    """Parse the user's tensors into :class:`Inputs` plus the layout finding, if any.

    Raises ``ValueError`` ("name: expected X, got Y") for inputs that cannot be diagnosed at all.
    """
    given = {k: v for k, v in (("log_probs", log_probs), ("logits", logits), ("probs", probs))
             if v is not None}
    expect(len(given) == 1, "log_probs/logits/probs", "exactly one of them",
           f"{len(given)} ({', '.join(given) or 'none'})")
    (kind, values), = given.items()
    x, dtype = to_numpy(values, kind)
    if x.ndim == 2 and to_numpy(input_lengths, "input_lengths")[0].ndim == 0:
        x = x[None] if layout == "NTC" else x[:, None]  # torch's unbatched (T, C), N = 1
    expect(x.ndim == 3, kind, "a 3-D array (T, N, C) or (N, T, C) (or (T, C) with scalar "
           "lengths)", f"shape {x.shape}")
    expect(x.dtype.kind == "f", kind, "a float array", f"dtype {dtype}")
    expect(layout in LAYOUTS, "layout", f"one of {', '.join(LAYOUTS)}", repr(layout))
    empty = [f"{axis} = 0" for axis, size in zip(layout, x.shape) if size == 0]
    expect(not empty, kind, f"a non-empty ({', '.join(layout)}) batch (at least one frame, "
           "sample and class)", f"shape {x.shape}: {', '.join(empty)}")
    expect(reduction in REDUCTIONS, "reduction", f"one of {', '.join(REDUCTIONS)}",
           repr(reduction))
    input_lengths = _int_array(input_lengths, "input_lengths")
    target_lengths = _int_array(target_lengths, "target_lengths")
    expect(input_lengths.ndim == 1, "input_lengths", "a 1-D array (N,)",
           f"shape {input_lengths.shape}")
    expect(target_lengths.shape == input_lengths.shape, "target_lengths",
           f"shape {input_lengths.shape} like input_lengths", f"shape {target_lengths.shape}")
    expect(bool((input_lengths >= 0).all()), "input_lengths", "non-negative values",
           input_lengths.tolist()[:MAX_LISTED])
    expect(bool((target_lengths >= 0).all()), "target_lengths", "non-negative values",
           target_lengths.tolist()[:MAX_LISTED])
    N = len(input_lengths)
    expect(N > 0, "input_lengths", "at least one sample", "an empty array")
    blank_arr, _ = to_numpy(blank, "blank")
    expect(blank_arr.size == 1 and blank_arr.dtype.kind in "iu", "blank", "an int", repr(blank))
    blank = int(blank_arr.reshape(()))

    findings = []
    x = x.astype(np.float64)
    expected_batch_axis = 1 if layout == "TNC" else 0
    batch_axis = expected_batch_axis
    if x.shape[expected_batch_axis] != N:
        other = 1 - expected_batch_axis
        expect(x.shape[other] == N, kind,
               f"a batch axis of size N = {N} (len(input_lengths)) in a {layout} array",
               f"shape {x.shape}")
        batch_axis = other
        findings.append(_layout_finding(kind, x.shape, layout, N, input_lengths))
    if batch_axis == 0:
        x = x.transpose(1, 0, 2)  # (N, T, C) -> (T, N, C)
    T, _, C = x.shape
    expect(C > 0, kind, "at least one class (C > 0)", f"shape {x.shape}")
    expect(-C <= blank < C, "blank",
           f"an index in [-{C}, {C}) (negative counts from the end, -1 = {C - 1})", blank)
    blank %= C  # as CTCProblem: -1 is the last class, TensorFlow's blank_index=-1

    targets_arr, targets_dtype = to_numpy(targets, "targets")
    if targets_arr.ndim == 3 and targets_arr.shape[0] == N and targets_arr.dtype.kind in "iuf":
        targets, finding = _onehot_targets(targets_arr, targets_dtype, blank, C)
        findings.append(finding)
    targets = _int_array(targets, "targets")
    if targets.ndim == 2 and targets.shape[0] != N and targets.shape[1] == N:  # (L, N)
        findings.append(_transposed_finding(targets.shape, N))
        targets = targets.T
    if targets.ndim == 1 and targets.shape[0] == input_lengths.sum() != target_lengths.sum():
        findings.append(_swapped_concatenated_finding(input_lengths, target_lengths, T))
        input_lengths, target_lengths = target_lengths, input_lengths
    if targets.ndim == 1:  # concatenated -> padded (N, L)
        total = int(target_lengths.sum())
        expect(targets.shape[0] == total, "targets",
               f"a concatenated 1-D array of length sum(target_lengths) = {total}",
               f"length {targets.shape[0]}")
        padded = np.full((N, int(target_lengths.max(initial=0))), blank, dtype=np.int64)
        ends = np.cumsum(target_lengths)
        for n, (start, end) in enumerate(zip(ends - target_lengths, ends)):
            padded[n, : end - start] = targets[start:end]
        targets = padded
    expect(targets.ndim == 2 and targets.shape[0] == N, "targets",
           f"a padded ({N}, L) array or a concatenated 1-D array", f"shape {targets.shape}")
    inputs = Inputs(x, kind, dtype, targets, input_lengths, target_lengths, blank,
                    layout, reduction, transposed=batch_axis != expected_batch_axis)
    return inputs, findings


def other_layout(layout: str) -> str:
    return LAYOUTS[1 - LAYOUTS.index(layout)]


def _layout_finding(kind, shape, layout, N, input_lengths) -> Finding:
    wanted, got = ("(T, N, C)", "(N, T, C)") if layout == "TNC" else ("(N, T, C)", "(T, N, C)")
    return Finding(
        Code.LAYOUT, "error",
        f"{kind} is {got} where {wanted} is expected: its axis {1 if layout == 'TNC' else 0} "
        f"has size {shape[1 if layout == 'TNC' else 0]} but the batch has N = {N} samples "
        f"(len(input_lengths)).",
        {"shape": list(shape), "N": N, "expected_layout": layout,
         "max_input_length": int(input_lengths.max()), "permute": [1, 0, 2]},
        "torch's ctc_loss wants time-major log_probs: pass x.transpose(0, 1) (or build the "
        "model output as (T, N, C)); batch_first only applies to the RNN, not to the loss.")


def _onehot_targets(onehot: np.ndarray, dtype: str, blank: int, C: int) -> tuple:
    """``(N, L, K)`` one-hot or probability targets: their argmax labels ``(N, L)`` (rows of
    zeros, the padding, as the blank) and the finding that names them."""
    rows = onehot.astype(np.float64)
    sums = rows.sum(-1)  # (N, L)
    filled = np.abs(sums - 1) < 1e-3
    in_unit = bool(((rows >= -1e-6) & (rows <= 1 + 1e-6)).all())
    onehot_rows = filled & np.isclose(rows.max(-1), 1)
    labels = np.where(filled, rows.argmax(-1), blank)
    kind = ("one-hot" if onehot_rows.sum() == filled.sum() else "probability (soft)") \
        if in_unit and filled.any() else "3-D"
    finding = Finding(
        Code.ONEHOT_TARGETS, "error",
        f"targets is a {kind} array of shape {tuple(onehot.shape)} ({dtype}) where CTC takes "
        f"class indices (N, L) or concatenated labels: a Keras/categorical habit; ctc_loss "
        "refuses float targets, or reads an integer one-hot as labels 0 and 1.",
        {"shape": list(onehot.shape), "dtype": dtype, "C": C,
         "rows_summing_to_1": int(filled.sum()), "rows_of_zeros": int((np.abs(sums) < 1e-3).sum()),
         "one_hot_rows": int(onehot_rows.sum())},
        "pass targets.argmax(-1) as int64 labels (N, L) with target_lengths counting the real "
        "labels (CTC has no soft labels); the doctor diagnosed the rest with those labels.")
    return labels, finding


def _transposed_finding(shape, N: int) -> Finding:
    return Finding(
        Code.TARGETS_TRANSPOSED, "error",
        f"targets is (L, N) = {tuple(shape)} where (N, L) is expected: its axis 1, not axis 0, "
        f"has the batch size N = {N} (len(input_lengths)).",
        {"shape": list(shape), "N": N},
        "pass targets.T (or build them batch-first: one row of labels per sample); the doctor "
        "diagnosed the rest with targets.T.")


def _swapped_concatenated_finding(input_lengths, target_lengths, T: int) -> Finding:
    return Finding(
        Code.LENGTHS_SWAPPED, "error",
        f"input_lengths and target_lengths are swapped: the concatenated targets hold "
        f"sum(input_lengths) = {int(input_lengths.sum())} labels, not sum(target_lengths) = "
        f"{int(target_lengths.sum())}.",
        {"input_lengths": input_lengths.tolist()[:MAX_LISTED],
         "target_lengths": target_lengths.tolist()[:MAX_LISTED], "T": T},
        "call ctc_loss(log_probs, targets, input_lengths, target_lengths) in that order (frames "
        "first, labels second); the doctor diagnosed the rest with them exchanged.")
