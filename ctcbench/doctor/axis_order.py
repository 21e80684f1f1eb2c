"""One cause for all the evidence: the values' axes in another order.

A tensor whose three axes are in an order the loss does not expect (a convolution's
``(N, C, T)``, a ``(T, C, N)`` from a wrong ``transpose``) sets off several findings at once: a
batch axis where time should be, lengths past ``T``, frames that do not sum to 1. None of
them is the mistake, and their fixes do not compose. :func:`reorderings` tries every order of
the three axes that puts the batch (``len(input_lengths)``) where the layout wants it, and
keeps an order only when, read that way, the batch is clean but for at most one finding of
its normalisation (which then stays, as a second mistake the order does not explain).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import numpy as np

from ctcbench.doctor.findings import MAX_LISTED, Code, Finding

NORMALISATION = frozenset({Code.SOFTMAX_AXIS, Code.NOT_NORMALIZED, Code.SIGMOID_OUTPUTS,
                           Code.PROBABILITIES_NOT_LOG})  # what an axis order cannot explain


@dataclass
class Reordering:
    """The user's values ``x`` read as ``x.transpose(perm)``: what is found then."""

    perm: tuple[int, int, int]
    inputs: object  # doctor.inputs.Inputs of the reordered values
    found: list[Finding]  # the findings of that reading (at most one normalisation error)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.found if f.severity == "error"]

    def axes_as_given(self, layout: str) -> str:
        """What each axis of the given values is: "NCT" for a (N, C, T) array."""
        return "".join(layout[self.perm.index(k)] for k in range(3))


def orders(shape: tuple[int, int, int], layout: str, N: int, skip=()) -> list[tuple[int, ...]]:
    """The axis orders, other than the one given and ``skip``, that put an axis of size ``N``
    where ``layout`` ("TNC" or "NTC") has its batch."""
    batch = layout.index("N")
    return [p for p in itertools.permutations(range(3))
            if p != (0, 1, 2) and p not in skip and shape[p[batch]] == N]


def reorderings(x: np.ndarray, layout: str, input_lengths, read, *, logits: bool,
                skip=()) -> list[Reordering]:
    """Every order of ``x``'s axes (:func:`orders`) under which the batch is clean but for at
    most one normalisation error, fewest errors first (then the order ``permutations`` gives).
    ``read(values) -> (Inputs, findings)`` diagnoses values as the user's ``layout`` holds
    them; a reading it refuses (``ValueError``) is no candidate. Raw scores (``logits``) are
    valid in any order, so for them the time axis must also have exactly the longest input's
    frames (a padded batch's length)."""
    out = []
    if x.size == 0 or not len(input_lengths):  # an empty batch has no order to read
        return out
    N, longest = len(input_lengths), int(np.max(input_lengths))
    for perm in orders(x.shape, layout, N, skip):
        if logits and x.shape[perm[layout.index("T")]] != longest:
            continue
        try:
            inputs, found = read(np.ascontiguousarray(x.transpose(perm)))
        except ValueError:
            continue
        errors = [f for f in found if f.severity == "error"]
        if len(errors) <= 1 and all(f.code in NORMALISATION for f in errors):
            out.append(Reordering(perm, inputs, found))
    return sorted(out, key=lambda r: len(r.errors))


def axis_order_finding(kind: str, shape, layout: str, r: Reordering, explained,
                       input_lengths) -> Finding:
    """The cause: ``kind`` of ``shape`` holds its axes in another order; ``r`` reads it right."""
    given = r.axes_as_given(layout)
    T = shape[r.perm[layout.index("T")]]
    normalised = not r.errors
    after = ("the lengths fit and every frame sums to 1" if normalised else
             f"the lengths fit; the frames still need {r.errors[0].code} (below)")
    return Finding(
        Code.LAYOUT, "error",
        f"{kind} holds its axes as ({', '.join(given)}) = {tuple(shape)}, not "
        f"({', '.join(layout)}): axis {r.perm[layout.index('T')]} has the {T} frames that "
        f"input_lengths count (at most {int(np.max(input_lengths))}), axis "
        f"{r.perm[layout.index('N')]} the N = {len(input_lengths)} samples and axis "
        f"{r.perm[layout.index('C')]} the classes; after permute{r.perm} {after}.",
        {"shape": list(shape), "axes_as_given": given, "permute": list(r.perm),
         "max_input_length": int(np.max(input_lengths)),
         "input_lengths": np.asarray(input_lengths).tolist()[:MAX_LISTED]},
        (f"take log_softmax over the classes (dim={r.perm[layout.index('C')]} of the values as "
         f"given), then pass .permute{r.perm} (numpy: np.transpose(x, {r.perm})) to the loss, "
         f"which wants ({', '.join(layout)})" if not normalised else
         f"pass {kind}.permute{r.perm} (numpy: np.transpose(x, {r.perm})) to the loss, which "
         f"wants ({', '.join(layout)})") + "; the doctor diagnosed the rest in that order.",
        explains=sorted(explained))


def ambiguous_layout(inp, findings) -> Finding | None:
    """A note where the batch, read as its ``layout``, cannot be told from another reading of
    the same values: ``T == N`` (time-major or batch-major both fit, and no padding shows
    which), or raw scores (no normalisation to find the class axis) with ``C`` equal to ``T``
    or ``N``. None where a finding already reordered the axes."""
    if inp.transposed or inp.given_axes or any(f.code == Code.LAYOUT for f in findings):
        return None
    T, N, C, _ = inp.shape
    layout, other = inp.layout, "NTC" if inp.layout == "TNC" else "TNC"
    evidence = {"shape": list(inp.x.shape if layout == "TNC" else inp.x.transpose(1, 0, 2).shape),
                "layout": layout}
    if T == N >= 2 and not _padding_tells(inp):
        return Finding(
            Code.LAYOUT_AMBIGUOUS, "info",
            f"T = N = {T}: the values read as ({', '.join(layout)}) and as "
            f"({', '.join(other)}) are both valid batches, and nothing in them (no padding "
            f"past input_lengths) shows which they are; the doctor read them as {layout}, "
            "the layout it was given (or its default).",
            {**evidence, "T": T, "N": N, "other_layout": other},
            f"say the layout: layout='{layout}' or layout='{other}' (ctcbench doctor --layout "
            f"{layout}|{other}); if the model's output is batch-major (N, T, C), which "
            f"torch's ctc_loss does not take, pass layout='NTC' here and x.transpose(0, 1) "
            "to the loss.")
    if inp.kind == "logits" and C in (T, N):
        twin = "T" if C == T else "N"
        return Finding(
            Code.LAYOUT_AMBIGUOUS, "info",
            f"C = {twin} = {C}: raw scores are valid along any axis, so nothing in the logits "
            f"shows that the last axis holds the classes and not the {twin} axis; the doctor "
            f"read them as ({', '.join(layout)}).",
            {**evidence, "C": C, twin: C},
            "make sure the classes are the last axis (a convolution's (N, C, T) needs "
            ".permute(2, 0, 1) for torch's loss), or pass log_softmax(dim=-1) of them as "
            "log_probs, whose per-frame normalisation the doctor checks on every axis.")
    return None


def _padding_tells(inp) -> bool:
    """Read with time and batch exchanged (T == N), some valid frame would be non-finite
    (NaN or inf padding past input_lengths) where none is as read: the values say their
    layout."""
    valid = inp.frame_mask  # (T, N), the same for either reading as T == N
    as_read = np.isfinite(inp.x[valid]).all()
    swapped = np.isfinite(inp.x.transpose(1, 0, 2)[valid]).all()
    return bool(as_read != swapped)
