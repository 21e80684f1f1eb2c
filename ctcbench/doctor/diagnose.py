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

from ctcbench.doctor.atlas_refs import cite_findings
from ctcbench.doctor.axis_order import ambiguous_layout, axis_order_finding, reorderings
from ctcbench.doctor.causes import (check_argmax_outputs, check_half_precision,
                                    check_padded_frames, corrections)
from ctcbench.doctor.config import DEFAULTS
from ctcbench.doctor.findings import Code, Finding, Report, Trait, codes_with, rank
from ctcbench.doctor.frame_checks import (check_blank_collapse, check_blank_index,
                                          check_time_invariant)
from ctcbench.doctor.input_checks import (check_infeasible, check_lengths, check_reduction,
                                          check_targets)
from ctcbench.doctor.inputs import Inputs, other_layout, prepare
from ctcbench.doctor.normalise import normalise

# Errors of lengths and labels that a correction (swapped lengths, ...) must all clear.
FIT_CODES = codes_with(Trait.FIT)


def diagnose(log_probs=None, *, logits=None, probs=None, targets, input_lengths, target_lengths,
             blank: int = 0, reduction: str = DEFAULTS.reduction,
             layout: str = DEFAULTS.layout) -> Report:
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
    given = {k: v for k, v in (("log_probs", log_probs), ("logits", logits), ("probs", probs))
             if v is not None}
    kind, values = next(iter(given.items())) if len(given) == 1 else (None, None)

    def read(x):
        """The batch with ``x`` as the values: (Inputs, every finding)."""
        inp, findings = prepare(**{kind: x}, targets=targets,
                                input_lengths=input_lengths, target_lengths=target_lengths,
                                blank=blank, reduction=reduction, layout=layout)
        return inp, findings + _findings(inp)

    try:
        inp, findings = prepare(log_probs, logits=logits, probs=probs, targets=targets,
                                input_lengths=input_lengths, target_lengths=target_lengths,
                                blank=blank, reduction=reduction, layout=layout)
        found = _findings(inp)
    except ValueError as refused:  # e.g. no batch axis where the layout wants it: another
        # order of the axes may still read, else the refusal stands
        inp, findings, found = _reordered(kind, values, layout, input_lengths, read, [],
                                          refusal=refused)
    errors = {f.code for f in findings + found if f.severity == "error"}
    past_the_end = inp.input_lengths.max() > inp.shape[0]  # time may be on another axis
    if len(errors) >= 2 or (Code.LENGTH_MISMATCH in errors and past_the_end):
        inp, findings, found = _reordered(kind, values, layout, input_lengths, read,
                                          findings + found, inp=inp, given=(findings, found))
    fits = {f.code for f in found} & FIT_CODES
    for code, fixed, finding in corrections(inp) if fits else ():
        if _fit_codes(fixed):
            continue
        cause = finding()
        rest = _findings(fixed)
        cause.explains = sorted({f.code for f in found} - {f.code for f in rest})
        found = [cause, *rest]
        break
    findings += found
    findings += [f for f in (ambiguous_layout(inp, findings),) if f is not None]
    T, N, C, L = inp.shape
    summary = {"T": T, "N": N, "C": C, "L": L, "kind": inp.kind, "dtype": inp.dtype,
               "blank": inp.blank,
               "layout": f"{other_layout(inp.layout)} (not {inp.layout})" if inp.transposed
               else f"{inp.given_axes} (not {inp.layout})" if inp.given_axes else inp.layout,
               "reduction": inp.reduction}
    cite_findings(findings)
    return Report(rank(findings), summary)


def _reordered(kind, values, layout, input_lengths, read, before, *, inp=None, given=None,
               refusal=None):
    """``(inputs, findings, found)`` read in the one axis order that explains ``before`` (the
    findings as given), with the cause first; as given when no order does (``refusal`` raised
    again when the values could not be read at all)."""
    from ctcbench.core.arrays import to_numpy
    x = to_numpy(values, kind)[0] if kind is not None else None
    lengths = to_numpy(input_lengths, "input_lengths")[0].reshape(-1)
    if x is None or x.ndim != 3 or lengths.dtype.kind not in "iu":  # no order to read
        if refusal is not None:
            raise refusal
        return inp, *given
    done = [(1, 0, 2)] if inp is not None and inp.transposed else []  # prepare's own swap
    found = reorderings(x, layout, lengths, read, logits=kind == "logits", skip=done)
    if not found:
        if refusal is not None:
            raise refusal
        return inp, *given
    best = found[0]
    for f in best.errors:  # a normalisation finding's dims are those of the reordered values
        f.message = f.message.rstrip(".") + f" (dims of the values after permute{best.perm})."
    best.inputs.given_axes = best.axes_as_given(layout)
    cause = axis_order_finding(kind, x.shape, layout, best,
                               {f.code for f in before} - {f.code for f in best.found}
                               - {Code.LAYOUT}, lengths)
    return best.inputs, [cause], best.found


def _fit_codes(inp: Inputs) -> set[str]:
    """The length and label errors of ``inp``, from the checks that need no model values."""
    return {f.code for f in check_lengths(inp) + check_targets(inp, None) + check_infeasible(inp)}


def _findings(inp: Inputs) -> list[Finding]:
    findings = check_lengths(inp)
    half = check_half_precision(inp)
    lp, norm = normalise(inp)
    findings += norm + ([half] if half else [])
    argmax = check_argmax_outputs(inp, lp)
    blank_finding = None if argmax else check_blank_index(inp, lp)
    findings += [f for f in (argmax, blank_finding) if f is not None]
    findings += check_targets(inp, blank_finding)
    findings += check_infeasible(inp)
    collapse = check_blank_collapse(inp, lp)
    invariant = check_time_invariant(inp, lp, collapse)
    padded = None if invariant or argmax else check_padded_frames(inp, lp)
    model = [f for f in (invariant, collapse) if f is not None]
    if argmax:  # one-hot frames are also probabilities, and no model state
        argmax.explains += [f.code for f in norm + model if f.code != Code.NON_FINITE]
    findings += model + [f for f in (padded, check_reduction(inp)) if f is not None]
    return findings
