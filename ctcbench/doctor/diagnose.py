"""``diagnose``: tell a user what is wrong with their own CTC inputs.

Each check looks at the tensors a user hands to a CTC loss and, when it finds a known
mistake, returns a :class:`Finding` with a stable ``code``, a severity, one sentence, the
numbers that show it (``evidence``) and the fix. Findings are ranked by severity, then by
how many other findings they explain, then by a fixed causal order (a wrong layout makes
every later check meaningless, a wrong blank index also puts "blanks" into the targets).

Shape letters as in :mod:`ctcbench.core.problem`: ``T`` frames, ``N`` batch, ``C`` classes
(blank included), ``L`` padded target width.

Severities: ``error`` a mistake in the inputs (the loss or its gradient is wrong or
meaningless); ``warning`` the inputs are valid but the model is in a known bad state (the
blank plateau); ``info`` a convention worth knowing. Only errors make ``Report.ok`` false.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from ctcbench.core.reference import forward_backward
from ctcbench.core.problem import _to_numpy
from ctcbench.core.reduction import REDUCTIONS

SEVERITIES = ("error", "warning", "info")
LAYOUTS = ("TNC", "NTC")

# Causal order used to break ties in the ranking: earlier codes invalidate later checks.
CODES = ("layout", "non-finite", "length-mismatch", "not-normalized", "probabilities-not-log",
         "blank-index", "target-out-of-range", "target-contains-blank", "infeasible-target",
         "time-invariant", "blank-collapse", "reduction")

# Thresholds, each chosen so that well-formed inputs of any shape stay clean.
NORM_TOL = {"float16": 2e-2, "bfloat16": 2e-2}  # |logsumexp(frame)| allowed; else 1e-3
SAME_FRAME_TOL = 1e-3  # frames whose log-probs spread less than this (rms) count as all alike
TIME_VARIANCE_SHARE = 0.1  # time-invariant when time explains less than this of frame variance
STEADY_SHARE = 0.75  # ... and this share of samples with 2+ labels change argmax at most twice
LOG_FLOOR = np.log(1e-12)  # log-probs are clipped here for variances (log(0) = -inf)
COLLAPSE_EMIT_SHARE = 0.2  # greedy output holds at most this share of the target labels
COLLAPSE_MARGIN = np.log(2)  # and blank is on average at least 2x as likely as the best label
DOMINANT_SHARE = 0.3  # blank-index: the other convention's blank is argmax on this share of frames
USER_BLANK_SHARE = 0.05  # ... while the loss's blank is argmax on at most this share
BLANK_CONFIDENCE = 0.3  # ... with at least this mean probability on the frames it wins
MIN_FRAMES = 16  # blank-index: valid frames needed before argmax shares mean anything
REDUCTION_RATIO = 10.0  # reduction note when max/min target length (clamped to 1) reaches this
MAX_LISTED = 10  # samples listed in evidence
MAX_LOSS_SAMPLES = 64  # losses for evidence are computed on at most this many samples


@dataclass
class Finding:
    """One diagnosed problem: a stable ``code``, a severity, what is wrong and how to fix it."""

    code: str
    severity: str
    message: str
    evidence: dict
    fix: str
    explains: list[str] = field(default_factory=list)


@dataclass
class Report:
    """All findings for one batch, ranked, plus what the doctor understood of the inputs."""

    findings: list[Finding]
    summary: dict

    @property
    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def ok(self) -> bool:
        """True when nothing at error severity was found."""
        return not self.errors

    def worst(self) -> str | None:
        """The highest severity present, or None when there are no findings."""
        present = {f.severity for f in self.findings}
        return next((s for s in SEVERITIES if s in present), None)

    def to_dict(self) -> dict:
        return {"summary": self.summary, "ok": self.ok,
                "findings": [asdict(f) for f in self.findings]}

    def format_table(self) -> str:
        s = self.summary
        lines = [f"ctcbench doctor: T={s['T']} N={s['N']} C={s['C']} L={s['L']} "
                 f"input={s['kind']} ({s['dtype']}) blank={s['blank']} layout={s['layout']} "
                 f"reduction={s['reduction']}"]
        if all(f.severity == "info" for f in self.findings):
            lines.append("no problems found" + (" (notes below)" if self.findings else ""))
        for f in self.findings:
            lines.append("")
            lines.append(f"{f.severity.upper():<8}{f.code}: {f.message}")
            for key, value in f.evidence.items():
                lines.append(f"        {key} = {_short(value)}")
            lines.append(f"        fix: {f.fix}")
            if f.explains:
                lines.append(f"        explains: {', '.join(f.explains)}")
        counts = {sev: sum(f.severity == sev for f in self.findings) for sev in SEVERITIES}
        lines.append("")
        lines.append(", ".join(f"{n} {sev}{'s' if n != 1 else ''}" for sev, n in counts.items()))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format_table()


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and len(value) > MAX_LISTED:
        return repr(value[:MAX_LISTED])[:-1] + f", ... ({len(value)} in all)]"
    return repr(value)


def _r(x: float, digits: int = 4) -> float:
    """A float for evidence: rounded, inf/nan kept."""
    x = float(x)
    return round(x, digits) if np.isfinite(x) else x


# -- preparing the inputs -------------------------------------------------------------------
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
        t, m = self.targets, self.label_mask
        repeats = ((t[:, 1:] == t[:, :-1]) & m[:, 1:]).sum(axis=1)
        return m.sum(axis=1) + repeats


def _expect(ok: bool, name: str, expected: str, got) -> None:
    if not ok:
        raise ValueError(f"{name}: expected {expected}, got {got}")


def _int_array(x, name: str) -> np.ndarray:
    arr, dtype = _to_numpy(x, name)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    _expect(arr.dtype.kind in "iu", name, "an integer array", f"dtype {dtype}")
    return arr.astype(np.int64)


def prepare(log_probs=None, *, logits=None, probs=None, targets, input_lengths, target_lengths,
            blank: int = 0, reduction: str = "mean", layout: str = "TNC") -> tuple[Inputs, list]:
    """Parse the user's tensors into :class:`Inputs` plus the layout finding, if any.

    Raises ``ValueError`` ("name: expected X, got Y") for inputs that cannot be diagnosed at all.
    """
    given = {k: v for k, v in (("log_probs", log_probs), ("logits", logits), ("probs", probs))
             if v is not None}
    _expect(len(given) == 1, "log_probs/logits/probs", "exactly one of them",
            f"{len(given)} ({', '.join(given) or 'none'})")
    (kind, values), = given.items()
    x, dtype = _to_numpy(values, kind)
    _expect(x.ndim == 3, kind, "a 3-D array (T, N, C) or (N, T, C)", f"shape {x.shape}")
    _expect(x.dtype.kind == "f", kind, "a float array", f"dtype {dtype}")
    _expect(layout in LAYOUTS, "layout", f"one of {', '.join(LAYOUTS)}", repr(layout))
    _expect(reduction in REDUCTIONS, "reduction", f"one of {', '.join(REDUCTIONS)}",
            repr(reduction))
    input_lengths = _int_array(input_lengths, "input_lengths")
    target_lengths = _int_array(target_lengths, "target_lengths")
    _expect(input_lengths.ndim == 1, "input_lengths", "a 1-D array (N,)",
            f"shape {input_lengths.shape}")
    _expect(target_lengths.shape == input_lengths.shape, "target_lengths",
            f"shape {input_lengths.shape} like input_lengths", f"shape {target_lengths.shape}")
    _expect(bool((input_lengths >= 0).all()), "input_lengths", "non-negative values",
            input_lengths.tolist()[:MAX_LISTED])
    _expect(bool((target_lengths >= 0).all()), "target_lengths", "non-negative values",
            target_lengths.tolist()[:MAX_LISTED])
    N = len(input_lengths)
    _expect(N > 0, "input_lengths", "at least one sample", "an empty array")
    blank_arr, _ = _to_numpy(blank, "blank")
    _expect(blank_arr.size == 1 and blank_arr.dtype.kind in "iu", "blank", "an int", repr(blank))
    blank = int(blank_arr.reshape(()))

    findings = []
    x = x.astype(np.float64)
    expected_batch_axis = 1 if layout == "TNC" else 0
    batch_axis = expected_batch_axis
    if x.shape[expected_batch_axis] != N:
        other = 1 - expected_batch_axis
        _expect(x.shape[other] == N, kind,
                f"a batch axis of size N = {N} (len(input_lengths)) in a {layout} array",
                f"shape {x.shape}")
        batch_axis = other
        findings.append(_layout_finding(kind, x.shape, layout, N, input_lengths))
    if batch_axis == 0:
        x = x.transpose(1, 0, 2)  # (N, T, C) -> (T, N, C)
    T, _, C = x.shape
    _expect(C > 0, kind, "at least one class (C > 0)", f"shape {x.shape}")
    _expect(0 <= blank < C, "blank", f"an index in [0, {C})", blank)

    targets = _int_array(targets, "targets")
    if targets.ndim == 1:  # concatenated -> padded (N, L)
        total = int(target_lengths.sum())
        _expect(targets.shape[0] == total, "targets",
                f"a concatenated 1-D array of length sum(target_lengths) = {total}",
                f"length {targets.shape[0]}")
        padded = np.full((N, int(target_lengths.max(initial=0))), blank, dtype=np.int64)
        ends = np.cumsum(target_lengths)
        for n, (start, end) in enumerate(zip(ends - target_lengths, ends)):
            padded[n, : end - start] = targets[start:end]
        targets = padded
    _expect(targets.ndim == 2 and targets.shape[0] == N, "targets",
            f"a padded ({N}, L) array or a concatenated 1-D array", f"shape {targets.shape}")
    inputs = Inputs(x, kind, dtype, targets, input_lengths, target_lengths, blank,
                    layout, reduction, transposed=batch_axis != expected_batch_axis)
    return inputs, findings


def _other(layout: str) -> str:
    return LAYOUTS[1 - LAYOUTS.index(layout)]


def _layout_finding(kind, shape, layout, N, input_lengths) -> Finding:
    wanted, got = ("(T, N, C)", "(N, T, C)") if layout == "TNC" else ("(N, T, C)", "(T, N, C)")
    return Finding(
        "layout", "error",
        f"{kind} is {got} where {wanted} is expected: its axis {1 if layout == 'TNC' else 0} "
        f"has size {shape[1 if layout == 'TNC' else 0]} but the batch has N = {N} samples "
        f"(len(input_lengths)).",
        {"shape": list(shape), "N": N, "expected_layout": layout,
         "max_input_length": int(input_lengths.max())},
        "torch's ctc_loss wants time-major log_probs: pass x.transpose(0, 1) (or build the "
        "model output as (T, N, C)); batch_first only applies to the RNN, not to the loss.")


# -- normalisation -----------------------------------------------------------------------------
def _logsumexp(x: np.ndarray) -> np.ndarray:
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isfinite(m), m, 0.0)
    with np.errstate(divide="ignore"):
        return (m + np.log(np.exp(x - m).sum(axis=-1, keepdims=True)))[..., 0]


def _log_softmax(x: np.ndarray) -> np.ndarray:
    return x - _logsumexp(x)[..., None]


def _looks_like_probs(rows: np.ndarray, tol: float) -> bool:
    """rows ``(F, C)``: every value in [0, 1] and every row sums to 1."""
    return bool(len(rows)) and bool(((rows >= -tol) & (rows <= 1 + tol)).all()) and \
        bool((np.abs(rows.sum(axis=-1) - 1) < tol * max(1, rows.shape[-1] ** 0.5)).all())


def normalise(inp: Inputs) -> tuple[np.ndarray, list[Finding]]:
    """``(T, N, C)`` log-probabilities the model most likely meant, plus normalisation findings.

    Padded frames and non-finite frames are set to a uniform distribution (never read).
    """
    T, N, C, _ = inp.shape
    valid = inp.frame_mask  # (T, N)
    x = inp.x
    # NaN or +inf anywhere, or -inf everywhere (a -inf is a legal "never"; a row of them is not)
    bad_frame = valid & (~(np.isfinite(x) | (x == -np.inf)).all(axis=-1)
                         | (x == -np.inf).all(axis=-1))
    ok = valid & ~bad_frame
    rows = x[ok]  # (F, C)
    tol = NORM_TOL.get(inp.dtype, 1e-3)
    findings = []
    uniform = np.full(C, -np.log(C))
    if inp.kind == "probs":
        if _looks_like_probs(rows, tol):
            with np.errstate(divide="ignore"):
                lp = np.log(np.clip(x, 0, None))
        else:
            lp = _log_softmax(x)
            lse = _logsumexp(rows)
            looks_log = bool((np.abs(lse) < tol).all())
            what = "log-probabilities" if looks_log else "raw scores (logits)"
            findings.append(Finding(
                "not-normalized", "error",
                f"probs is not a probability distribution per frame: rows sum to "
                f"{rows.sum(-1).min():.4g}..{rows.sum(-1).max():.4g} with values in "
                f"[{rows.min():.4g}, {rows.max():.4g}]; they look like {what}.",
                {"row_sum_min": _r(rows.sum(-1).min()), "row_sum_max": _r(rows.sum(-1).max()),
                 "value_min": _r(rows.min()), "value_max": _r(rows.max())},
                f"pass them as {'log_probs' if what.startswith('log') else 'logits'} instead, "
                "or apply softmax(-1) first."))
    elif inp.kind == "logits":
        lp = _log_softmax(x)
        if _looks_like_probs(rows, tol) and C > 1:
            findings.append(_probs_finding(inp, rows, as_logits=True))
    else:  # log_probs
        lse = _logsumexp(rows)  # (F,)
        if len(rows) and np.abs(lse).max() >= tol:
            if _looks_like_probs(rows, tol) and C > 1:
                findings.append(_probs_finding(inp, rows, as_logits=False))
                with np.errstate(divide="ignore"):
                    lp = np.log(np.clip(x, 0, None))
            else:
                lp = _log_softmax(x)
                findings.append(_not_normalized_finding(inp, rows, lse, lp))
        else:
            lp = x
    lp = np.where(ok[..., None], lp, uniform)
    if bad_frame.any():
        t, n = np.argwhere(bad_frame)[0]
        samples = sorted(set(np.argwhere(bad_frame)[:, 1].tolist()))
        findings.append(Finding(
            "non-finite", "error",
            f"{int(bad_frame.sum())} valid frame(s) in {len(samples)} sample(s) hold NaN, +inf or "
            "only -inf "
            f"(first at t={t}, n={n}); the loss and its gradient will be NaN.",
            {"frames": int(bad_frame.sum()), "samples": samples},
            "find where the model produces them (overflowing activations, log(0) on "
            "probabilities, a division by a zero length); frames past input_lengths may hold "
            "anything."))
    return lp, findings


def _probs_finding(inp: Inputs, rows, *, as_logits: bool) -> Finding:
    evidence = {"value_min": _r(rows.min()), "value_max": _r(rows.max()),
                "row_sum_min": _r(rows.sum(-1).min()), "row_sum_max": _r(rows.sum(-1).max())}
    if as_logits:
        return Finding(
            "probabilities-not-log", "error",
            "logits are already probabilities (every frame in [0, 1], summing to 1): softmax "
            "would be applied twice, which squashes every frame towards uniform and stalls "
            "training.", evidence,
            "drop the model's final softmax (output raw scores), or pass log() of them as "
            "log_probs.")
    return Finding(
        "probabilities-not-log", "error",
        "log_probs holds probabilities (every frame in [0, 1], summing to 1): softmax output was "
        "passed where log_softmax output is expected, so the loss scores exp(p) and can go "
        "negative.", evidence,
        "use log_softmax(-1) instead of softmax(-1) (or take .log() of the probabilities).")


def _not_normalized_finding(inp: Inputs, rows, lse, lp) -> Finding:
    evidence = {"row_sum_min": _r(np.exp(lse.min())), "row_sum_max": _r(np.exp(lse.max())),
                "logsumexp_max_abs": _r(np.abs(lse).max())}
    usable = _usable(inp)
    if usable.any():
        raw = np.where(inp.frame_mask[..., None], inp.x, 0.0)
        raw = np.where(np.isfinite(raw), raw, 0.0)
        loss_raw = _losses(raw, inp, inp.blank, usable)
        loss_norm = _losses(lp, inp, inp.blank, usable)
        evidence["mean_loss_as_given"] = _r(np.mean(loss_raw))
        evidence["mean_loss_after_log_softmax"] = _r(np.mean(loss_norm))
        evidence["negative_losses"] = int((loss_raw < 0).sum())
    return Finding(
        "not-normalized", "error",
        "rows of exp(log_probs) do not sum to 1 (raw scores passed as log-probabilities): the "
        "loss is not a negative log-likelihood, can go negative, and the gradient torch "
        "returns is not the gradient of the printed loss.", evidence,
        "apply log_softmax(-1) to the model output before the loss (or pass them as logits).")


# -- losses under other conventions -----------------------------------------------------------
def _usable(inp: Inputs, *, blanks=()) -> np.ndarray:
    """``(N,)`` samples whose labels are valid classes (none equal to the blank(s) in
    ``blanks`` or to ``inp.blank``) and whose target fits its frames: the loss is finite."""
    T, N, C, L = inp.shape
    m = inp.label_mask
    ok = ((inp.targets >= 0) & (inp.targets < C)) | ~m
    for b in (inp.blank, *blanks):
        ok &= (inp.targets != b) | ~m
    return ok.all(axis=1) & (inp.target_lengths <= L) & (inp.needed_frames() <= inp.lengths)


def _losses(lp: np.ndarray, inp: Inputs, blank: int, samples: np.ndarray) -> np.ndarray:
    """Per-sample CTC loss of the chosen ``samples`` (the first ``MAX_LOSS_SAMPLES`` of them,
    so evidence stays cheap on big batches) under ``blank``, by the NumPy reference."""
    idx = np.flatnonzero(samples)[:MAX_LOSS_SAMPLES]
    targets = np.where(inp.label_mask, inp.targets, 0)[idx]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):  # -inf log-zeros
        fb = forward_backward(np.ascontiguousarray(lp[:, idx]), targets, inp.lengths[idx],
                              inp.target_lengths[idx], blank=blank)
    return fb.loss


# -- the checks ----------------------------------------------------------------------------------
def _check_lengths(inp: Inputs) -> list[Finding]:
    T, N, C, L = inp.shape
    findings = []
    too_long = np.flatnonzero(inp.input_lengths > T)
    if len(too_long):
        factor = float(inp.input_lengths.max()) / T
        hint = ""
        if factor >= 1.5:
            hint = (f" They look like widths before the model's downsampling (about {factor:.3g}x "
                    f"longer than T).")
        findings.append(Finding(
            "length-mismatch", "error",
            f"input_lengths exceed the {T} frames of the output for {len(too_long)} of {N} "
            f"samples (max {int(inp.input_lengths.max())}).{hint}",
            {"T": T, "max_input_length": int(inp.input_lengths.max()),
             "ratio_to_T": _r(factor, 3), "samples": too_long.tolist()},
            "compute input_lengths on the model's time axis (after pooling/stride: e.g. "
            "width // downsampling, or the conv arithmetic), and never above T."))
    too_wide = np.flatnonzero(inp.target_lengths > L)
    if len(too_wide):
        findings.append(Finding(
            "length-mismatch", "error",
            f"target_lengths exceed the padded target width L = {L} for {len(too_wide)} samples.",
            {"L": L, "max_target_length": int(inp.target_lengths.max()),
             "samples": too_wide.tolist()},
            "pass the true label counts as target_lengths (padding excluded)."))
    return findings


def _check_targets(inp: Inputs, blank_finding: Finding | None) -> list[Finding]:
    T, N, C, L = inp.shape
    m = inp.label_mask
    findings = []
    out = m & ((inp.targets < 0) | (inp.targets >= C))
    if out.any():
        bad = inp.targets[out]
        findings.append(Finding(
            "target-out-of-range", "error",
            f"{int(out.sum())} target labels lie outside the {C} classes of the output "
            f"(values {int(bad.min())}..{int(bad.max())}).",
            {"C": C, "bad_values": sorted(set(bad.tolist()))[:MAX_LISTED],
             "samples": sorted(set(np.argwhere(out)[:, 0].tolist()))},
            "labels must be class indices in [0, C) other than the blank: check the vocabulary "
            "size of the output layer (it needs one extra class for the blank)."))
    has_blank = m & (inp.targets == inp.blank)
    if has_blank.any():
        where = [tuple(map(int, p)) for p in np.argwhere(has_blank)]
        labels = inp.targets[m]
        keras_like = inp.blank == 0 and not (labels == C - 1).any()
        fix = ("labels must never equal the blank. ")
        fix += ("The labels look 0-based with no class C-1 used: the Keras/TF v1 convention puts "
                f"the blank at C-1 = {C - 1}; pass blank={C - 1}, or shift labels by +1 and keep "
                "blank=0." if keras_like else
                "Reserve one class for the blank and map the labels to the others.")
        findings.append(Finding(
            "target-contains-blank", "error",
            f"{len(where)} target labels equal the blank index {inp.blank} "
            f"(in {len(set(w[0] for w in where))} samples); CTC cannot emit a blank as a label.",
            {"blank": inp.blank, "count": len(where), "positions": [list(w) for w in where]},
            fix))
        if blank_finding is not None and blank_finding.severity == "error":
            blank_finding.explains.append("target-contains-blank")
    return findings


def _check_infeasible(inp: Inputs) -> list[Finding]:
    need, have = inp.needed_frames(), inp.lengths
    bad = np.flatnonzero(need > have)
    if not len(bad):
        return []
    detail = [{"sample": int(n), "needs": int(need[n]), "has": int(have[n]),
               "short_by": int(need[n] - have[n])} for n in bad[:MAX_LISTED]]
    return [Finding(
        "infeasible-target", "error",
        f"{len(bad)} of {len(have)} targets need more frames (labels + adjacent repeats) than "
        f"their input length (short by up to {int((need - have)[bad].max())}); their loss is "
        "inf, and nan once averaged.",
        {"count": int(len(bad)), "samples": detail},
        "downsample time less (or feed wider inputs), drop these samples, or pass "
        "zero_infinity=True so they contribute 0 loss and 0 gradient instead of inf/nan.")]


def _check_blank_index(inp: Inputs, lp: np.ndarray) -> Finding | None:
    T, N, C, L = inp.shape
    valid = inp.frame_mask
    if C < 2 or not valid.any():
        return None
    if valid.sum() < MIN_FRAMES:
        return None
    best = lp.argmax(-1)  # (T, N)
    # A frame whose argmax is one of its sample's target labels is that label, not a blank.
    is_label = ((best[..., None] == inp.targets[None]) & inp.label_mask[None]).any(-1)  # (T, N)
    argmax = np.where(is_label, -1, best)[valid]  # (F,); -1: a target label of the sample
    share = np.bincount(argmax + 1, minlength=C + 1)[1:] / len(argmax)
    # The two conventions in use: blank 0 (torch, warp-ctc) and blank C-1 (Keras, TF v1).
    candidates = [b for b in (0, C - 1) if b != inp.blank]
    model_blank = max(candidates, key=lambda b: share[b])
    if share[model_blank] < DOMINANT_SHARE or share[inp.blank] > USER_BLANK_SHARE:
        return None
    # A trained model's blank frames are confident; an untrained one's argmax is a coin toss.
    confidence = float(np.exp(lp[..., model_blank][valid][argmax == model_blank]).mean())
    if confidence < BLANK_CONFIDENCE:
        return None
    evidence = {"loss_blank": inp.blank, "model_blank": model_blank,
                "argmax_share_model_blank": _r(share[model_blank], 3),
                "argmax_share_loss_blank": _r(share[inp.blank], 3),
                "mean_prob_where_argmax": _r(confidence, 3)}
    both = _usable(inp, blanks=(model_blank,))
    evidence["samples_scored_under_both"] = int(min(both.sum(), MAX_LOSS_SAMPLES))
    if both.any():
        as_given = _losses(lp, inp, inp.blank, both)
        other = _losses(lp, inp, model_blank, both)
        evidence[f"mean_loss_blank_{inp.blank}"] = _r(as_given.mean())
        evidence[f"mean_loss_blank_{model_blank}"] = _r(other.mean())
        if not other.mean() < as_given.mean():
            return None
    conv = {0: " (torch/PyTorch default)", C - 1: " (Keras/TF v1 convention)"}
    shares = (f"class {model_blank} is the argmax on {share[model_blank]:.0%} of frames (not "
              f"counting frames where it is a target label), class {inp.blank} (the loss's "
              f"blank) on {share[inp.blank]:.1%}")
    fix = (f"use one convention end to end: pass blank={model_blank} to the loss (and the "
           "decoder), or retrain/relabel so the model's blank is the loss's blank.")
    if not both.any():  # no loss to compare: a hint, not a diagnosis
        return Finding(
            "blank-index", "info",
            f"the model's frames may use blank = {model_blank}{conv.get(model_blank, '')}: "
            f"{shares}; unconfirmed, as no sample can be scored under both blanks (each "
            f"holds {inp.blank} or {model_blank} as a label, or does not fit its frames).",
            evidence, "if the model was trained with another blank, " + fix)
    return Finding(
        "blank-index", "error",
        f"the model's frames look like blank = {model_blank}{conv.get(model_blank, '')}: "
        f"{shares}.", evidence, fix)


def _greedy_emissions(lp: np.ndarray, inp: Inputs) -> np.ndarray:
    """``(N,)`` labels emitted by greedy (best-path) decoding on the valid frames."""
    return np.array([len(labels) for labels in _greedy_decode(inp, lp.argmax(-1))])


def _greedy_decode(inp: Inputs, best: np.ndarray) -> list[list[int]]:
    """Per sample, the labels greedy decoding of ``best`` ``(T, N)`` argmaxes emits."""
    out = []
    for n, length in enumerate(inp.lengths):
        path = best[:length, n]
        keep = np.r_[True, path[1:] != path[:-1]] & (path != inp.blank)
        out.append(path[keep].tolist())
    return out


def _edit_distance(a: list, b: list) -> int:
    """Levenshtein distance between two label sequences."""
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


def _check_blank_collapse(inp: Inputs, lp: np.ndarray) -> Finding | None:
    valid = inp.frame_mask
    judged = (inp.target_lengths > 0) & (inp.needed_frames() <= inp.lengths)
    if not judged.any():
        return None
    emitted = _greedy_emissions(lp, inp)[judged]
    targets = np.minimum(inp.target_lengths, inp.shape[3])[judged]
    blank_prob = np.exp(lp[..., inp.blank])[valid].mean()
    argmax_blank = (lp.argmax(-1) == inp.blank)[valid].mean()
    healthy_blank = 1 - targets.sum() / inp.lengths[judged].sum()
    empty = float((emitted == 0).mean())
    floored = np.maximum(lp, LOG_FLOOR)  # log(0) = -inf would make -inf - -inf = nan
    others = np.delete(floored, inp.blank, axis=-1).max(-1) if lp.shape[-1] > 1 else floored[..., 0]
    margin = float((floored[..., inp.blank] - others)[valid].mean())  # log-odds blank vs best label
    if emitted.sum() > COLLAPSE_EMIT_SHARE * targets.sum() or margin < COLLAPSE_MARGIN:
        return None
    return Finding(
        "blank-collapse", "warning",
        f"greedy decoding emits {int(emitted.sum())} labels for {int(targets.sum())} target "
        f"labels ({empty:.0%} of samples decode to nothing): the model sits on the blank "
        "plateau, predicting blank on "
        f"{argmax_blank:.0%} of frames where a perfect model would on about {healthy_blank:.0%}.",
        {"emitted_labels": int(emitted.sum()), "target_labels": int(targets.sum()),
         "empty_output_share": _r(empty, 3), "argmax_blank_share": _r(argmax_blank, 3),
         "mean_blank_prob": _r(blank_prob, 3), "mean_blank_log_odds": _r(margin, 3),
         "perfect_blank_share": _r(healthy_blank, 3)},
        "CTC learns blanks first; usually it needs more steps, a learning rate that is not too "
        "high or too low (try 1e-4..1e-3 with Adam, or RMSprop), less momentum if the loss "
        "oscillates, gradient clipping, and short samples first (curriculum).")


def _check_time_invariant(inp: Inputs, lp: np.ndarray, collapse: Finding | None) -> Finding | None:
    """Frames that do not change along time.

    With several samples: time explains almost none of the variance of the frames in the
    middle half of each sample, and most samples with two or more labels change their argmax
    at most twice (each sample has its own constant frame, perhaps after a short settling, as
    an RNN fed one repeated vector gives). Otherwise, per sample: the frames' spread along
    time is under 1% of how far their mean frame is from uniform, with one argmax class, and
    over all valid frames the argmax changes at most twice and greedy decoding is not within
    half the target length (edit distance) of the target."""
    T, N, C, L = inp.shape
    lengths = inp.lengths
    eligible = lengths >= 4
    if C < 2 or not eligible.any():
        return None
    t = np.arange(T)[:, None]
    # The middle half of each sample's frames: an RNN fed a constant vector settles from the
    # start (and, if bidirectional, from the end); content varies there all the same.
    middle = (t >= lengths[None, :] // 4) & (t < lengths[None, :] - lengths[None, :] // 4)
    mask = inp.frame_mask & middle & eligible[None, :]  # (T, N)
    x = np.where(mask[..., None], np.maximum(lp, LOG_FLOOR), 0.0)  # (T, N, C); log(0) clipped
    frames = int(mask.sum())
    sample_mean = x.sum(0) / np.maximum(mask.sum(0), 1)[:, None]  # (N, C)
    within = float((((x - sample_mean[None]) ** 2).sum(-1) * mask).sum() / frames)
    overall = float((((x - x.sum((0, 1)) / frames) ** 2).sum(-1) * mask).sum() / frames)
    evidence = {"checked_samples": int(eligible.sum())}
    # A healthy model can also hold a steady background for long stretches; it still changes
    # its argmax at least 3 times to emit 2 labels (blank, a, blank, b, ...), where a settling
    # RNN changes it at most at both ends.
    best = lp.argmax(-1)  # (T, N)
    changes = ((best[1:] != best[:-1]) & inp.frame_mask[1:]).sum(axis=0)  # (N,)
    if eligible.sum() >= 2 and overall > SAME_FRAME_TOL ** 2:
        share = within / overall
        evidence.update(time_variance_share=_r(share), frame_variance=_r(overall))
        judged = eligible & (inp.target_lengths >= 2)
        if share >= TIME_VARIANCE_SHARE or not judged.any():
            return None
        steady = float((changes[judged] <= 2).mean())
        evidence["steady_argmax_share"] = _r(steady, 3)
        if steady < STEADY_SHARE:
            return None
    else:  # one sample, or every frame alike: compare each sample's change along time with
        # how far its mean frame is from uniform (zero for uniform frames: nothing to judge).
        # The middle half of a confident model is all blank: the argmax over all valid frames
        # and the greedy output decide too (a sample that decodes to its target moves).
        decoded = _greedy_decode(inp, best)
        for n in np.flatnonzero(eligible):
            own = x[mask[:, n], n]  # (t, C)
            mean = own.mean(0)
            change = ((own - mean) ** 2).sum(-1).mean()
            shape = ((mean - mean.mean()) ** 2).sum()
            if not change < TIME_VARIANCE_SHARE ** 2 * shape or len(set(own.argmax(-1))) > 1:
                return None
            target = inp.targets[n, inp.label_mask[n]].tolist()
            if changes[n] > 2 or _edit_distance(decoded[n], target) < max(len(target), 1) / 2:
                return None
        evidence["frames_alike"] = True
        if collapse is not None:
            return None  # one constant blank frame for every input: the blank plateau says it all
    evidence["mean_loss_of_these_frames"] = _r(_invariant_loss(inp, lp))
    finding = Finding(
        "time-invariant", "error",
        "the frames (nearly) do not change along time: each sample shows the same distribution "
        "at every step, so the model cannot place labels, as when one feature vector is "
        "repeated for every time step.", evidence,
        "feed the recurrent/attention layers a sequence along the image width (e.g. conv "
        "features permuted to (W, N, C*H), or unfold windows), not one pooled vector copied T "
        "times.")
    if collapse is not None:
        finding.explains.append("blank-collapse")
    return finding


def _invariant_loss(inp: Inputs, lp: np.ndarray) -> float:
    """Mean loss of the given frames (as a yardstick for the plateau); nan if none usable."""
    usable = _usable(inp)
    return float(_losses(lp, inp, inp.blank, usable).mean()) if usable.any() else float("nan")


def _check_reduction(inp: Inputs) -> Finding | None:
    if inp.reduction != "mean" or len(inp.target_lengths) < 2:
        return None
    clamped = np.maximum(inp.target_lengths, 1)
    ratio = clamped.max() / clamped.min()
    empty = ", empty targets count as 1" if inp.target_lengths.min() == 0 else ""
    if ratio < REDUCTION_RATIO:
        return None
    return Finding(
        "reduction", "info",
        f"reduction='mean' divides each loss by its own target length ({int(clamped.min())}.."
        f"{int(clamped.max())}{empty}), so per label a short sample weighs "
        f"{ratio:.3g}x more than a long one and the printed loss is not comparable to a "
        "per-sample mean.",
        {"min_target_length": int(inp.target_lengths.min()),
         "max_target_length": int(inp.target_lengths.max()), "weight_ratio": _r(ratio, 3)},
        "that is torch's documented convention; use reduction='sum' / N for a per-sample mean, "
        "and compare losses across runs only under one reduction.")


# -- the entry point -----------------------------------------------------------------------------
def diagnose(log_probs=None, *, logits=None, probs=None, targets, input_lengths, target_lengths,
             blank: int = 0, reduction: str = "mean", layout: str = "TNC") -> Report:
    """Diagnose one batch of CTC inputs; returns a ranked :class:`Report`.

    Args:
      log_probs: ``(T, N, C)`` what you pass to ``ctc_loss`` (expected: log_softmax output).
        Or instead ``logits=`` (raw scores; log_softmax is applied here) or ``probs=``
        (softmax output). NumPy arrays or torch tensors.
      targets: padded ``(N, L)`` or concatenated 1-D integer labels.
      input_lengths, target_lengths: ``(N,)`` integers.
      blank: the blank index the loss uses. reduction: the loss's reduction ("mean" is torch's).
      layout: ``"TNC"`` (time-major, torch's ctc_loss) or ``"NTC"`` (batch-major, as you feed it).

    Raises ``ValueError`` ("name: expected X, got Y") for inputs that cannot be diagnosed.
    Usage in a training loop: ``print(ctcbench.diagnose(log_probs, targets=..., ...))``.
    """
    inp, findings = prepare(log_probs, logits=logits, probs=probs, targets=targets,
                            input_lengths=input_lengths, target_lengths=target_lengths,
                            blank=blank, reduction=reduction, layout=layout)
    findings += _check_lengths(inp)
    lp, norm = normalise(inp)
    findings += norm
    blank_finding = _check_blank_index(inp, lp)
    findings += [blank_finding] if blank_finding else []
    findings += _check_targets(inp, blank_finding)
    findings += _check_infeasible(inp)
    collapse = _check_blank_collapse(inp, lp)
    invariant = _check_time_invariant(inp, lp, collapse)
    findings += [f for f in (invariant, collapse, _check_reduction(inp)) if f is not None]
    findings.sort(key=lambda f: (SEVERITIES.index(f.severity), -len(f.explains),
                                 CODES.index(f.code)))
    T, N, C, L = inp.shape
    summary = {"T": T, "N": N, "C": C, "L": L, "kind": inp.kind, "dtype": inp.dtype,
               "blank": inp.blank,
               "layout": f"{_other(inp.layout)} (not {inp.layout})" if inp.transposed
               else inp.layout,
               "reduction": inp.reduction}
    return Report(findings, summary)
