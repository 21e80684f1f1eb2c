"""The canonical CTC problem every backend adapter converts from.

Shape letters, used throughout ctcbench:
  T  frames (padded time axis)        N  batch
  C  classes, blank included          L  padded target width
  S  = 2L + 1 extended states (blank, l1, blank, l2, ..., blank)

Conventions (one place for each):
  * ``logits`` are unnormalised scores, time-major ``(T, N, C)``; log_softmax is the
    adapter's job, so every backend is compared on the same input.
  * ``targets`` are padded ``(N, L)``; a concatenated 1-D form is accepted and padded.
  * frames ``t >= input_lengths[n]`` and target entries ``>= target_lengths[n]`` are
    ignored completely: they may hold NaN or garbage.
  * in valid frames a logit may be ``-inf`` (probability 0, as masked vocabularies give);
    ``+inf``, NaN, or a frame with no finite logit is an error naming ``(t, n)``.
"""
from __future__ import annotations

import numpy as np

from ctcbench.core.arrays import float_sum, to_numpy
from ctcbench.core.ctcmath import adjacent_repeats, feasible, log_softmax
from ctcbench.errors import expect

FLOAT_DTYPES = ("float16", "bfloat16", "float32", "float64")


def _int_vector(x, name: str, n: int | None, *, most: int, bound: str) -> np.ndarray:
    """A 1-D integer array in ``[0, most]``, as int64; the range is checked in the caller's
    dtype, before the cast, so a uint64 2**64 - 1 cannot wrap to -1."""
    arr, dtype = to_numpy(x, name)
    expect(arr.ndim == 1, name, "a 1-D integer array", f"shape {arr.shape}")
    expect(arr.dtype.kind in "iu", name, "an integer dtype", dtype)
    if n is not None:
        expect(arr.shape[0] == n, name, f"shape ({n},) (one per batch element)", f"shape {arr.shape}")
    expect(bool((arr >= 0).all()), name, "non-negative lengths", arr.tolist())
    expect(bool((arr <= most).all()), name, f"values <= {bound}", arr.tolist())
    return arr.astype(np.int64)


def _one_sample(targets, input_lengths, target_lengths):
    """Unbatched inputs as a batch of one: ``targets (L,) -> (1, L)``, scalar lengths -> ``(1,)``."""
    targets, _ = to_numpy(targets, "targets")
    expect(targets.ndim == 1, "targets", "a 1-D array (L,) with unbatched (T, C) logits",
           f"shape {targets.shape}")
    lengths = []
    for value, name in ((input_lengths, "input_lengths"), (target_lengths, "target_lengths")):
        arr, _ = to_numpy(value, name)
        expect(arr.size == 1 and arr.ndim <= 1, name, "a scalar with unbatched (T, C) logits",
               f"shape {arr.shape}")
        lengths.append(arr.reshape(1))
    return targets[None, :], lengths[0], lengths[1]  # (1, L), (1,), (1,)


def _frozen(arr: np.ndarray) -> np.ndarray:
    """``arr`` made read-only: a validated problem cannot be changed afterwards."""
    arr.flags.writeable = False
    return arr


class CTCProblem:
    """One batch of CTC inputs, validated once, in the canonical layout.

    Args:
      logits: ``(T, N, C)`` float16/bfloat16/float32/float64, NumPy array or torch tensor;
        or unbatched ``(T, C)``, one sample (N = 1), with 1-D ``targets (L,)`` and scalar
        lengths, as torch's ``ctc_loss`` takes it.
      targets: padded ``(N, L)`` integers, or concatenated 1-D of length ``sum(target_lengths)``.
      input_lengths: ``(N,)`` valid frames per sample, ``<= T``.
      target_lengths: ``(N,)`` labels per sample, ``<= L``.
      blank: index of the blank class in ``[-C, C)``; a negative one counts from the end
        (``-1`` is ``C - 1``, TensorFlow's ``blank_index=-1``) and is stored as ``blank % C``.
      copy: ``False`` holds a read-only view of the caller's logits where they need no
        conversion, instead of a private copy; for a caller that runs the problem at once and
        does not change the logits meanwhile (``ctcbench.torch``'s forward: the copy was 3 %
        of a training step).

    The targets are stored padded int64 whatever form they came in; ``target_layout``
    (``"padded"`` or ``"concatenated"``) and ``index_dtype`` (``"int32"`` or ``"int64"``)
    remember the caller's form, so adapters that take both can hand it on unchanged.

    Attributes (read-only arrays, private to the problem unless ``copy=False``):
      logits: ``(T, N, C)`` NumPy array in the given dtype (bfloat16 is held as float32).
      dtype: name of the dtype the caller asked for, e.g. ``"float32"`` or ``"bfloat16"``.
      targets: ``(N, L)`` int64; entries past ``target_lengths`` are set to ``blank``.
      input_lengths, target_lengths: ``(N,)`` int64.
      unbatched: whether the caller gave one ``(T, C)`` sample (held as ``(T, 1, C)``).
    """

    def __init__(self, logits, targets, input_lengths, target_lengths, *, blank: int = 0,
                 copy: bool = True):
        given, (logits, dtype) = logits, to_numpy(logits, "logits")
        unbatched = logits.ndim == 2
        if unbatched:  # (T, C): one sample, torch's unbatched form
            logits = logits[:, None, :]  # (T, 1, C)
            targets, input_lengths, target_lengths = _one_sample(targets, input_lengths,
                                                                 target_lengths)
        expect(logits.ndim == 3, "logits", "a 3-D array (T, N, C) or an unbatched 2-D (T, C)",
               f"shape {logits.shape}")
        expect(dtype in FLOAT_DTYPES, "logits", f"a float dtype ({', '.join(FLOAT_DTYPES)})", dtype)
        T, N, C = logits.shape
        expect(N > 0, "logits", "a non-empty batch (N > 0)", f"shape {logits.shape}")
        expect(C > 0, "logits", "at least one class (C > 0)", f"shape {logits.shape}")
        expect(isinstance(blank, (int, np.integer)) and not isinstance(blank, bool),
               "blank", "an int", repr(blank))
        expect(-C <= blank < C, "blank",
               f"an index in [-{C}, {C}) (negative counts from the end, -1 = {C - 1})", blank)
        blank = int(blank) % C  # -1 -> C - 1, as TensorFlow's blank_index

        input_lengths = _int_vector(input_lengths, "input_lengths", N, most=T, bound=f"T = {T}")
        target_lengths = _int_vector(target_lengths, "target_lengths", N,
                                     most=np.iinfo(np.int64).max, bound="2**63 - 1")
        target_layout, index_dtype = self._target_form(targets)
        targets = self._padded_targets(targets, target_lengths, N)  # (N, L), caller's dtype

        L = targets.shape[1]
        valid_label = np.arange(L)[None, :] < target_lengths[:, None]  # (N, L)
        labels = targets[valid_label]  # checked before the int64 cast, which could wrap
        expect(bool(((labels >= 0) & (labels < C)).all()), "targets",
               f"labels in [0, {C})", sorted(set(labels[(labels < 0) | (labels >= C)].tolist())))
        targets = targets.astype(np.int64)
        bad = np.argwhere(valid_label & (targets == blank))
        expect(len(bad) == 0, "targets", f"no label equal to blank={blank}",
               f"blank at (sample, position) {[tuple(map(int, b)) for b in bad[:5]]}")

        # -inf is probability 0 (masked vocabularies); +inf, NaN or a frame without any
        # finite entry has no distribution. A finite sum of all logits means every one is
        # finite (one pass, no copy: most batches); else the valid frames are looked at.
        if not np.isfinite(float_sum(given, logits)):  # also when huge logits overflow it
            self._check_frames(logits, input_lengths)

        # Private, read-only copies: a validated problem cannot be changed afterwards.
        self.logits = _frozen(np.array(logits, copy=True) if copy else logits.view())
        self.dtype = dtype
        self.targets = _frozen(np.where(valid_label, targets, blank).astype(np.int64))
        self.input_lengths = _frozen(input_lengths)
        self.target_lengths = _frozen(target_lengths)
        self.blank = blank
        self.target_layout = target_layout
        self.index_dtype = index_dtype
        self.unbatched = unbatched

    @staticmethod
    def _check_frames(logits: np.ndarray, input_lengths: np.ndarray) -> None:
        """A ValueError naming the first valid frame that holds +inf or NaN, or no finite
        value."""
        T = logits.shape[0]
        valid_frame = np.arange(T)[:, None] < input_lengths[None, :]  # (T, N)
        rows = logits[valid_frame]  # (frames, C)
        bad = (np.isnan(rows) | (rows == np.inf)).any(axis=1) | ~np.isfinite(rows).any(axis=1)
        if bad.any():
            t, n = np.argwhere(valid_frame)[np.flatnonzero(bad)[0]]
            raise ValueError(f"logits: expected finite values or -inf, at least one finite, in "
                             f"every valid frame, got +inf, NaN or no finite value at t={t}, "
                             f"n={n} (input_lengths[{n}] = {input_lengths[n]})")

    @staticmethod
    def _target_form(targets) -> tuple[str, str]:
        """(layout, index dtype) of the targets as the caller gave them."""
        arr, dtype = to_numpy(targets, "targets")
        layout = "concatenated" if arr.ndim == 1 else "padded"
        narrow = dtype in ("int32", "int16", "int8", "uint8", "uint16")
        return layout, ("int32" if narrow else "int64")

    @staticmethod
    def _padded_targets(targets, target_lengths: np.ndarray, N: int) -> np.ndarray:
        targets, dtype = to_numpy(targets, "targets")
        expect(targets.dtype.kind in "iu", "targets", "an integer dtype", dtype)
        if targets.ndim == 1:  # concatenated -> padded (N, L)
            total = int(target_lengths.sum())
            expect(targets.shape[0] == total, "targets",
                   f"a concatenated 1-D array of length sum(target_lengths) = {total}",
                   f"length {targets.shape[0]}")
            padded = np.zeros((N, int(target_lengths.max(initial=0))), dtype=targets.dtype)
            ends = np.cumsum(target_lengths)
            for n, (start, end) in enumerate(zip(ends - target_lengths, ends)):
                padded[n, : end - start] = targets[start:end]
            return padded
        expect(targets.ndim == 2, "targets", "a padded (N, L) or concatenated 1-D array",
               f"shape {targets.shape}")
        expect(targets.shape[0] == N, "targets", f"{N} rows (one per batch element)",
               f"shape {targets.shape}")
        expect(bool((target_lengths <= targets.shape[1]).all()), "target_lengths",
               f"values <= padded target width L = {targets.shape[1]}", target_lengths.tolist())
        return targets

    # -- shapes -------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, int, int, int]:
        """``(T, N, C, L)``."""
        T, N, C = self.logits.shape
        return T, N, C, self.targets.shape[1]

    @property
    def frame_mask(self) -> np.ndarray:
        """``(T, N)`` bool, True on frames inside ``input_lengths``."""
        T = self.logits.shape[0]
        return np.arange(T)[:, None] < self.input_lengths[None, :]

    # -- derived views adapters need -------------------------------------------------
    def concatenated_targets(self) -> np.ndarray:
        """``(sum(target_lengths),)`` int64, the labels of all samples back to back."""
        L = self.targets.shape[1]
        return self.targets[np.arange(L)[None, :] < self.target_lengths[:, None]]

    def clean_logits(self, dtype=np.float64) -> np.ndarray:
        """``(T, N, C)`` logits with padded frames zeroed, for adapters that cannot mask."""
        return np.where(self.frame_mask[..., None], self.logits, 0).astype(dtype)

    def log_probs(self) -> np.ndarray:
        """``(T, N, C)`` float64 log_softmax of the logits; padded frames zeroed first."""
        return log_softmax(self.clean_logits(np.float64))

    def repeats(self) -> np.ndarray:
        """``(N,)`` adjacent repeated labels per target; a target needs L + r frames."""
        return adjacent_repeats(self.targets, self.target_lengths)

    def feasible(self) -> np.ndarray:
        """``(N,)`` bool: the target fits, ``input_length >= L + repeats``."""
        return feasible(self.targets, self.input_lengths, self.target_lengths)

    def with_logits(self, logits) -> "CTCProblem":
        """The same targets and lengths with other logits (e.g. another dtype)."""
        problem = CTCProblem(logits, self.targets, self.input_lengths, self.target_lengths,
                             blank=self.blank)
        problem.target_layout, problem.index_dtype = self.target_layout, self.index_dtype
        problem.unbatched = self.unbatched
        return problem

    def __repr__(self) -> str:
        T, N, C, L = self.shape
        return f"CTCProblem(T={T}, N={N}, C={C}, L={L}, blank={self.blank}, dtype={self.dtype})"
