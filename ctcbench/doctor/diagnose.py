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

from ctcbench.doctor.findings import Report, rank
from ctcbench.doctor.frame_checks import (check_blank_collapse, check_blank_index,
                                          check_time_invariant)
from ctcbench.doctor.input_checks import (check_infeasible, check_lengths, check_reduction,
                                          check_targets)
from ctcbench.doctor.inputs import other_layout, prepare
from ctcbench.doctor.normalise import normalise


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
    findings += check_lengths(inp)
    lp, norm = normalise(inp)
    findings += norm
    blank_finding = check_blank_index(inp, lp)
    findings += [blank_finding] if blank_finding else []
    findings += check_targets(inp, blank_finding)
    findings += check_infeasible(inp)
    collapse = check_blank_collapse(inp, lp)
    invariant = check_time_invariant(inp, lp, collapse)
    findings += [f for f in (invariant, collapse, check_reduction(inp)) if f is not None]
    T, N, C, L = inp.shape
    summary = {"T": T, "N": N, "C": C, "L": L, "kind": inp.kind, "dtype": inp.dtype,
               "blank": inp.blank,
               "layout": f"{other_layout(inp.layout)} (not {inp.layout})" if inp.transposed
               else inp.layout,
               "reduction": inp.reduction}
    return Report(rank(findings), summary)
