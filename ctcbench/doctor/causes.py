"""Causes seen in real reports that the tensors reveal: half-precision values, a loss on argmax
outputs, padded frames counted as real, and inputs that are right once corrected (lengths
swapped, target lengths that count the padding, square targets transposed)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ctcbench.core.ctcmath import greedy_decode
from ctcbench.doctor.findings import MAX_LISTED, Code, Finding, rounded
from ctcbench.doctor.inputs import Inputs

HALF = ("float16", "bfloat16")
ONEHOT_TOP = -1e-6  # argmax outputs: the top log-prob is log(1), up to rounding
ONEHOT_REST = np.log(1e-4)  # ... and every other class the same value, at most this
SAME_TOL = 1e-5  # frames alike: log-probs within this (plus as much relative)
MIN_RUN = 3  # padded frames: at least this many trailing frames alike
LOG_FLOOR = np.log(1e-12)


def check_half_precision(inp: Inputs) -> Finding | None:
    if inp.dtype not in HALF:
        return None
    eps = float(np.finfo(np.float16).eps) if inp.dtype == "float16" else 2.0 ** -7
    return Finding(
        Code.HALF_PRECISION, "error",
        f"{inp.kind} is {inp.dtype}: torch's ctc_loss on the CPU refuses it (\"ctc_loss_cpu\" "
        f"not implemented), cuDNN's path takes only float32, and where a kernel does take it the "
        f"{inp.dtype} rounding ({eps:.3g} relative) of log-probabilities and of the summed "
        "alignments makes the loss and its gradient coarse or inf.",
        {"dtype": inp.dtype, "kind": inp.kind, "relative_rounding": rounded(eps, 6)},
        "compute log_softmax and the loss in float32: ctc_loss(logits.float().log_softmax(-1), "
        "...) also inside torch.autocast (mixed precision keeps the model in half, the loss in "
        "float32).")


def check_argmax_outputs(inp: Inputs, lp: np.ndarray) -> Finding | None:
    """Every valid frame one-hot: one class at log(1), every other at one value (-inf, or a
    clamp such as log(1e-8)); exactly 0/1 values when passed as logits."""
    T, N, C, L = inp.shape
    valid = inp.frame_mask
    if C < 3 or valid.sum() < 2:
        return None
    x = inp.x[valid]  # (F, C) as given
    if not np.isfinite(x).any(axis=-1).all():
        return None
    if inp.kind == "logits":
        onehot = bool(np.isin(x, (0.0, 1.0)).all() and (x.sum(-1) == 1).all())
    else:
        with np.errstate(divide="ignore"):
            rows = np.log(np.clip(x, 0, None)) if inp.kind == "probs" else x
        ordered = np.sort(rows, -1)  # (F, C); NaN last
        top, lo, hi = ordered[:, -1], ordered[:, 0], ordered[:, -2]
        single = hi < top
        with np.errstate(invalid="ignore"):
            alike = (lo == hi) | (np.abs(hi - lo) <= SAME_TOL)
        onehot = bool((single & (top >= ONEHOT_TOP) & alike & (hi <= ONEHOT_REST)).all())
    if not onehot:
        return None
    decoded = greedy_decode(lp, inp.lengths, blank=inp.blank)
    matching = sum(decoded[n] == inp.targets[n, inp.label_mask[n]].tolist() for n in range(N))
    others = np.unique(np.delete(np.sort(x, -1), -1, -1)) if inp.kind != "logits" else [0.0]
    return Finding(
        Code.ARGMAX_OUTPUTS, "error",
        f"every valid frame of {inp.kind} is one-hot: the loss is computed on argmax (or "
        "one_hot(argmax)) outputs, not on the model's log_softmax: no gradient reaches the "
        "model, and every alignment but the argmax path scores as impossible.",
        {"frames": int(valid.sum()), "other_class_values": [rounded(v) for v in others[:3]],
         "samples_whose_argmax_path_is_the_target": int(matching), "N": N},
        "pass log_softmax(logits, -1) of the model's output to the loss; argmax belongs to "
        "decoding only.")


def check_padded_frames(inp: Inputs, lp: np.ndarray) -> Finding | None:
    """Samples whose last valid frames are the model's output on padding, counted as real by
    input_lengths: one and the same frame, or frame for frame the same as another sample's at
    the same steps (its padding, or frames past its input length), and in either case seen
    nowhere earlier in the sample."""
    T, N, C, L = inp.shape
    if C < 2:
        return None
    x = np.maximum(lp, LOG_FLOOR)  # (T, N, C)
    shared = _shared_frames(inp)  # (T, N)
    flagged = []
    for n in np.flatnonzero(inp.lengths >= MIN_RUN + 1):
        length = int(inp.lengths[n])
        frames = x[:length, n]  # (t, C)
        last = frames[-1]
        same = (np.abs(frames - last) <= SAME_TOL * (1 + np.abs(last))).all(-1)  # (t,)
        runs = [_trailing_run(same), _trailing_run(shared[:length, n])]
        run = max(r for r, mark in zip(runs, (same, shared[:length, n]))
                  if MIN_RUN <= r < length and not mark[: length - r].any()) if any(
            MIN_RUN <= r < length and not mark[: length - r].any()
            for r, mark in zip(runs, (same, shared[:length, n]))) else 0
        if not run:
            continue
        if _made_by_hand(frames).all():
            continue  # every frame one class up, the rest alike: noiseless, nothing tells padding
        flagged.append((int(n), length, run))
    if not flagged:
        return None
    last_frames = np.array([x[length - 1, n] for n, length, _ in flagged])
    same_last = len(flagged) > 1 and bool(
        (np.abs(last_frames - last_frames[0]) <= SAME_TOL * (1 + np.abs(last_frames[0]))).all())
    detail = [{"sample": n, "input_length": length, "padding_like_last_frames": run,
               "real_length_at_most": length - run} for n, length, run in flagged]
    return Finding(
        Code.PADDED_FRAMES_COUNTED, "error",
        f"{len(flagged)} of {N} samples end in up to {max(r for *_, r in flagged)} frames that "
        "repeat one frame, or another sample's frames at the same steps, unlike any earlier "
        "frame of theirs" + (", the same last frame in every one of them" if same_last else "")
        + ": the model's output on padding, which input_lengths counts as real frames, so the "
        "loss aligns labels to padding.",
        {"count": len(flagged), "samples": detail[:MAX_LISTED],
         "same_frame_across_samples": same_last},
        "pass each sample's real length on the model's time axis as input_lengths (e.g. its "
        "unpadded width after the model's downsampling), not T for every sample.")


def _made_by_hand(frames: np.ndarray) -> np.ndarray:
    """``(t,)`` True for frames ``(t, C)`` with one class up and all the others alike, as
    noiseless synthetic frames are and a model's output never is."""
    ordered = np.sort(frames, -1)
    return (ordered[:, -1] > ordered[:, -2]) & (ordered[:, -2] - ordered[:, 0] <= SAME_TOL)


def _trailing_run(mark: np.ndarray) -> int:
    """How many of the last entries of the bool array ``mark`` are True."""
    return int(np.argmin(mark[::-1])) if not mark.all() else len(mark)


def _shared_frames(inp: Inputs) -> np.ndarray:
    """``(T, N)`` True where a valid frame, as given, equals another sample's frame at the same
    step exactly (that one valid or not); non-finite frames equal nothing."""
    T, N, C, L = inp.shape
    if N < 2:
        return np.zeros((T, N), dtype=bool)
    finite = (np.isfinite(inp.x) | (inp.x == -np.inf)).all(-1)  # (T, N); -inf: a legal zero
    weights = np.random.default_rng(0).uniform(1, 2, size=C)  # positive: no cancellation
    keys = np.where(finite, np.where(inp.x == -np.inf, -1e4, inp.x) @ weights, np.nan)  # (T, N)
    out = (keys[:, :, None] == keys[:, None, :]).sum(-1) > 1  # (T, N); NaN equals nothing
    return out & inp.frame_mask


# -- inputs that are right once corrected ---------------------------------------------------------
def corrections(inp: Inputs):
    """``(code, corrected Inputs, build finding)`` candidates, most specific first."""
    T, N, C, L = inp.shape
    yield (Code.LENGTHS_SWAPPED,
           replace(inp, input_lengths=inp.target_lengths, target_lengths=inp.input_lengths),
           lambda: _swapped_finding(inp))
    if L == N and N > 1:
        yield (Code.TARGETS_TRANSPOSED, replace(inp, targets=inp.targets.T.copy()),
               lambda: Finding(
                   Code.TARGETS_TRANSPOSED, "error",
                   f"targets ({N} x {L}) look transposed: read as (N, L) they hold labels "
                   "that are invalid or do not fit their lengths, read as (L, N) they fit.",
                   {"shape": [L, N]}, "pass targets.T (one row of labels per sample)."))
    factor = _downsampling(inp)
    if factor:
        frames = np.minimum(-(-inp.input_lengths // factor), T)  # ceil(length / factor)
        yield (Code.INPUT_LENGTHS_UNITS, replace(inp, input_lengths=frames),
               lambda: _units_finding(inp, factor, frames))
    pad, trimmed = _trailing_pad(inp)
    if pad is not None:
        yield (Code.TARGET_LENGTHS_PADDED, replace(inp, target_lengths=trimmed),
               lambda: _padded_lengths_finding(inp, pad, trimmed))


def _downsampling(inp: Inputs) -> int | None:
    """The whole factor (2 or more) by which ``input_lengths`` count more than the frames,
    when the longest is that factor times ``T`` (within one step of it), as lengths measured
    before a model's pooling or stride are."""
    T, longest = inp.shape[0], int(inp.input_lengths.max())
    factor = round(longest / T)
    if factor < 2 or not (factor * (T - 1) < longest <= factor * T + factor - 1):
        return None
    return factor


def _units_finding(inp: Inputs, factor: int, frames: np.ndarray) -> Finding:
    T = inp.shape[0]
    return Finding(
        Code.INPUT_LENGTHS_UNITS, "error",
        f"input_lengths count the model's input, not its {T} output frames: the longest is "
        f"{int(inp.input_lengths.max())}, {factor} x T; divided by {factor} (rounded up) every "
        f"length fits the frames and every target fits its length.",
        {"T": T, "factor": factor, "given": inp.input_lengths.tolist()[:MAX_LISTED],
         "in_frames": frames.tolist()[:MAX_LISTED]},
        f"pass input_lengths in output frames: the model's own arithmetic (for a total stride "
        f"of {factor}: (length + {factor - 1}) // {factor}, or the conv formula), clipped to "
        f"T; the doctor diagnosed the rest with those.")


def _swapped_finding(inp: Inputs) -> Finding:
    return Finding(
        Code.LENGTHS_SWAPPED, "error",
        "input_lengths and target_lengths are swapped: as given, targets do not fit their "
        "lengths; exchanged, every target fits its frames.",
        {"input_lengths": inp.input_lengths.tolist()[:MAX_LISTED],
         "target_lengths": inp.target_lengths.tolist()[:MAX_LISTED], "T": inp.shape[0],
         "L": inp.shape[3]},
        "call ctc_loss(log_probs, targets, input_lengths, target_lengths) in that order (frames "
        "first, labels second); the doctor diagnosed the rest with them exchanged.")


def _trailing_pad(inp: Inputs) -> tuple:
    """The padding value and the lengths without it, when every label that is not a class
    (the blank, negative, >= C) sits in a trailing run of one value inside target_lengths."""
    T, N, C, L = inp.shape
    m = inp.label_mask
    bad = m & ((inp.targets == inp.blank) | (inp.targets < 0) | (inp.targets >= C))
    if not bad.any():
        return None, None
    values, counts = np.unique(inp.targets[bad], return_counts=True)
    pad = int(values[counts.argmax()])
    trimmed = inp.target_lengths.copy()
    for n in range(N):
        keep = np.flatnonzero(inp.targets[n] != pad)  # the whole padded row ends in pad
        end = keep[-1] + 1 if len(keep) else 0
        trimmed[n] = min(end, inp.target_lengths[n])
    over = trimmed < inp.target_lengths
    # The mistake gives every sample one length, the padded width: two or more samples end in
    # padding, or one in two or more pads or in a negative one (a single trailing label equal to
    # the blank is no proof).
    enough = over.sum() >= 2 or (inp.target_lengths - trimmed).max() >= 2 or pad < 0
    if not enough or len(set(inp.target_lengths[over].tolist())) > 1:
        return None, None
    return pad, trimmed


def _padded_lengths_finding(inp: Inputs, pad: int, trimmed: np.ndarray) -> Finding:
    over = np.flatnonzero(trimmed < inp.target_lengths)
    return Finding(
        Code.TARGET_LENGTHS_PADDED, "error",
        f"target_lengths count the padding: {len(over)} of {len(trimmed)} samples end in "
        f"padding value {pad} inside their target_lengths (up to "
        f"{int((inp.target_lengths - trimmed).max())} labels), so the loss asks for "
        f"{'blanks' if pad == inp.blank else 'labels'} that are not there.",
        {"pad_value": pad, "samples": over.tolist()[:MAX_LISTED],
         "given": inp.target_lengths[over].tolist()[:MAX_LISTED],
         "without_padding": trimmed[over].tolist()[:MAX_LISTED]},
        f"pass target_lengths = (targets != {pad}).sum(1) (the real label counts), not the "
        "padded width; the doctor diagnosed the rest with those.")
