"""Which log-probabilities the model meant: log_probs, logits or probs as given, checked for
normalisation, with the findings for probabilities, raw scores and non-finite frames."""
from __future__ import annotations

import numpy as np

from ctcbench.core.ctcmath import log_softmax, logsumexp
from ctcbench.doctor.findings import Code, Finding, rounded
from ctcbench.doctor.inputs import Inputs
from ctcbench.doctor.losses import reference_losses, usable_samples

NORM_TOL = {"float16": 2e-2, "bfloat16": 2e-2}  # |logsumexp(frame)| allowed; else 1e-3
MIN_SIGMOID_VALUES = 30  # logits all in (0, 1) are sigmoid outputs only when there are this many
SATURATED_SHARE = 0.5  # sigmoid outputs have more than this share of values strictly in (0, 1)


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
        if not len(rows) or _looks_like_probs(rows, tol):  # no valid frame: nothing to judge
            with np.errstate(divide="ignore"):
                lp = np.log(np.clip(x, 0, None))
        else:
            lp = log_softmax(x)
            axis = _wrong_axis(inp, np.clip(x, 0, None), tol)
            lse = logsumexp(rows)
            looks_log = bool((np.abs(lse) < tol).all())
            what = "log-probabilities" if looks_log else "raw scores (logits)"
            sigmoid = None if axis else _sigmoid_finding(inp, rows)
            if sigmoid:
                lp = _from_sigmoid(x)
            findings.append(axis or sigmoid or Finding(
                Code.NOT_NORMALIZED, "error",
                f"probs is not a probability distribution per frame: rows sum to "
                f"{rows.sum(-1).min():.4g}..{rows.sum(-1).max():.4g} with values in "
                f"[{rows.min():.4g}, {rows.max():.4g}]; they look like {what}.",
                {"row_sum_min": rounded(rows.sum(-1).min()), "row_sum_max": rounded(rows.sum(-1).max()),
                 "value_min": rounded(rows.min()), "value_max": rounded(rows.max())},
                f"pass them as {'log_probs' if what.startswith('log') else 'logits'} instead, "
                "or apply softmax(-1) first."))
    elif inp.kind == "logits":
        lp = log_softmax(x)
        sigmoid = _sigmoid_finding(inp, rows)
        if _looks_like_probs(rows, tol) and C > 1:
            findings.append(_probs_finding(inp, rows, as_logits=True))
        elif sigmoid and rows.size >= MIN_SIGMOID_VALUES:  # raw scores may lie in (0, 1)
            findings.append(sigmoid)
            lp = _from_sigmoid(x)
    else:  # log_probs
        lse = logsumexp(rows)  # (F,)
        if len(rows) and np.abs(lse).max() >= tol:
            if _looks_like_probs(rows, tol) and C > 1:
                findings.append(_probs_finding(inp, rows, as_logits=False))
                with np.errstate(divide="ignore"):
                    lp = np.log(np.clip(x, 0, None))
            else:
                lp = log_softmax(x)
                with np.errstate(over="ignore"):
                    axis = _wrong_axis(inp, np.exp(x), tol)
                if axis is None and ((rows >= -tol) & (rows <= 1 + tol)).all():
                    axis = _wrong_axis(inp, np.clip(x, 0, None), tol)  # softmax, not log
                    if axis is not None:
                        axis.message += " They are probabilities, too, not log-probabilities."
                        axis.fix = "log_softmax(dim=-1), not softmax: " + axis.fix
                sigmoid = None if axis else _sigmoid_finding(inp, rows)
                if sigmoid:
                    lp = _from_sigmoid(x)
                elif axis is None and (rows <= 0).all() and np.median(lse) > tol:
                    # exp() in (0, 1] and most frames summing above 1, which no log_softmax
                    # lowered by an offset does: a log-sigmoid
                    sigmoid = _sigmoid_finding(inp, np.exp(rows), logged=True)
                    if sigmoid:
                        lp = _from_sigmoid(np.exp(x))
                findings.append(axis or sigmoid or _not_normalized_finding(inp, rows, lse, lp))
        else:
            lp = x
    lp = np.where(ok[..., None], lp, uniform)
    if bad_frame.any():
        t, n = np.argwhere(bad_frame)[0]
        samples = sorted(set(np.argwhere(bad_frame)[:, 1].tolist()))
        findings.append(Finding(
            Code.NON_FINITE, "error",
            f"{int(bad_frame.sum())} valid frame(s) in {len(samples)} sample(s) hold NaN, +inf or "
            "only -inf "
            f"(first at t={t}, n={n}); the loss and its gradient will be NaN.",
            {"frames": int(bad_frame.sum()), "samples": samples},
            "find where the model produces them (overflowing activations, log(0) on "
            "probabilities, a division by a zero length); frames past input_lengths may hold "
            "anything."))
    return lp, findings


def _probs_finding(inp: Inputs, rows, *, as_logits: bool) -> Finding:
    evidence = {"value_min": rounded(rows.min()), "value_max": rounded(rows.max()),
                "row_sum_min": rounded(rows.sum(-1).min()), "row_sum_max": rounded(rows.sum(-1).max())}
    if as_logits:
        return Finding(
            Code.PROBABILITIES_NOT_LOG, "error",
            "logits are already probabilities (every frame in [0, 1], summing to 1): softmax "
            "would be applied twice, which squashes every frame towards uniform and stalls "
            "training.", evidence,
            "drop the model's final softmax (output raw scores), or pass log() of them as "
            "log_probs.")
    return Finding(
        Code.PROBABILITIES_NOT_LOG, "error",
        "log_probs holds probabilities (every frame in [0, 1], summing to 1): softmax output was "
        "passed where log_softmax output is expected, so the loss scores exp(p) and can go "
        "negative.", evidence,
        "use log_softmax(-1) instead of softmax(-1) (or take .log() of the probabilities).")


def _not_normalized_finding(inp: Inputs, rows, lse, lp) -> Finding:
    evidence = {"row_sum_min": rounded(np.exp(lse.min())), "row_sum_max": rounded(np.exp(lse.max())),
                "logsumexp_max_abs": rounded(np.abs(lse).max())}
    usable = usable_samples(inp)
    if usable.any():
        raw = np.where(inp.frame_mask[..., None], inp.x, 0.0)
        raw = np.where(np.isfinite(raw), raw, 0.0)
        loss_raw = reference_losses(raw, inp, inp.blank, usable)
        loss_norm = reference_losses(lp, inp, inp.blank, usable)
        evidence["mean_loss_as_given"] = rounded(np.mean(loss_raw))
        evidence["mean_loss_after_log_softmax"] = rounded(np.mean(loss_norm))
        evidence["negative_losses"] = int((loss_raw < 0).sum())
    return Finding(
        Code.NOT_NORMALIZED, "error",
        "rows of exp(log_probs) do not sum to 1 (raw scores passed as log-probabilities): the "
        "loss is not a negative log-likelihood, can go negative, and the gradient torch "
        "returns is not the gradient of the printed loss.", evidence,
        "apply log_softmax(-1) to the model output before the loss (or pass them as logits).")


def _wrong_axis(inp: Inputs, p: np.ndarray, tol: float) -> Finding | None:
    """``p`` ``(T, N, C)`` probabilities as given: softmax taken over the batch or the time axis
    (every (frame, class) summing to 1 over the samples, or every (sample, class) over its
    frames, all of them or its valid ones), not over the classes."""
    T, N, C, _ = inp.shape
    valid = inp.frame_mask
    ntc = (inp.layout == "NTC") != inp.transposed  # the array as the user holds it
    dims = {"batch": 0 if ntc else 1, "time": 1 if ntc else 0}
    class_sums = p.sum(-1)[valid]
    found = None
    full = np.isfinite(p).all(axis=(1, 2))  # (T,) frames where every sample is finite
    if N > 1 and full.any():
        sums = p[full].sum(1)  # (t, C) over the batch
        if (np.abs(sums - 1) < tol * max(1, N ** 0.5)).all():
            found = "batch", sums
    if found is None and T > 1:
        for over in (valid, np.isfinite(p).all(-1)):  # the valid frames, or all finite ones
            if not over.any(axis=0).all():
                continue
            sums = np.where(over[..., None], p, 0).sum(0)  # (N, C) over time
            if (np.abs(sums - 1) < tol * max(1, T ** 0.5)).all():
                found = "time", sums
                break
    if found is None:
        return None
    name, sums = found
    return Finding(
        Code.SOFTMAX_AXIS, "error",
        f"{inp.kind} is normalised over the {name} axis (dim {dims[name]}), not over the classes: "
        f"summed over {'the samples' if name == 'batch' else 'the frames'}, every "
        f"{'(frame, class)' if name == 'batch' else '(sample, class)'} gives 1 "
        f"({sums.min():.4g}..{sums.max():.4g}) while each frame's classes sum to "
        f"{class_sums.min():.4g}..{class_sums.max():.4g}.",
        {"axis": name, "dim": dims[name], f"sum_over_{name}_min": rounded(sums.min()),
         f"sum_over_{name}_max": rounded(sums.max()),
         "class_sum_min": rounded(class_sums.min()), "class_sum_max": rounded(class_sums.max())},
        f"take log_softmax over the class axis: log_softmax(dim=-1) (dim=2), not dim="
        f"{dims[name]}; the doctor diagnosed the rest after log_softmax over the classes.")


def _sigmoid_finding(inp: Inputs, rows, *, logged: bool = False) -> Finding | None:
    """rows ``(F, C)``, C >= 3: every value inside [0, 1], most of them strictly, while the rows
    do not sum to 1 (checked by the caller): each class squashed on its own, not a softmax
    over them. A float32 sigmoid saturates to exactly 0 or 1 past |score| ~ 17, so those are
    allowed where most values are not. ``logged``: the rows are exp() of the values given,
    which were log-sigmoid outputs (``logsigmoid``, ``log(sigmoid)``)."""
    C = inp.shape[2]
    if C < 3 or not len(rows) or not ((rows >= 0) & (rows <= 1)).all():
        return None
    inside = (rows > 0) & (rows < 1)
    if inside.mean() <= SATURATED_SHARE:
        return None  # one-hot or 0/1 masks are no sigmoid's
    sums = rows.sum(-1)
    what = ("log-sigmoid outputs (logsigmoid, or log of a sigmoid)" if logged
            else "sigmoid outputs")
    shown = "exp() of every value" if logged else "every value"
    return Finding(
        Code.SIGMOID_OUTPUTS, "error",
        f"{inp.kind} are {what}, not a distribution over the classes: {shown} is in [0, 1] "
        f"({rows.min():.4g}..{rows.max():.4g}) while a frame's {C} classes sum to "
        f"{sums.min():.4g}..{sums.max():.4g}; each class was squashed on its own, so the loss "
        "reads them as "
        + ("log-probabilities that are not one distribution per frame." if logged else
           {"log_probs": "log-probabilities above 0 and can go negative.",
            "probs": "probabilities that are not one distribution.",
            "logits": "scores within 1 of each other: nearly uniform frames, which stall "
                      "training."}[inp.kind]),
        {"value_min": rounded(rows.min()), "value_max": rounded(rows.max()),
         "row_sum_min": rounded(sums.min()), "row_sum_max": rounded(sums.max()),
         "saturated_values": int((~inside).sum())},
        f"replace the model's final {'logsigmoid' if logged else 'sigmoid'} with "
        "log_softmax(dim=-1) over the classes (CTC needs one distribution per frame); the "
        "doctor diagnosed the rest from the scores before it (log(p) - log(1 - p)).")


def _from_sigmoid(x: np.ndarray) -> np.ndarray:
    """The log-probabilities of the scores a sigmoid was applied to: log_softmax(logit(x)),
    a saturated 0 or 1 read as float32's last step before it."""
    x = np.clip(x, np.finfo(np.float32).tiny, 1 - np.finfo(np.float32).epsneg)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.log(x) - np.log1p(-x)
    return log_softmax(np.where(np.isfinite(z), z, 0.0))
