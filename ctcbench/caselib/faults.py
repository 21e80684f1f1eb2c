"""Common faults of CTC loss implementations, each a reference variant of the loss.

A :class:`Model` is the CTC loss of one sample computed in float64 NumPy by its own small
forward-backward, with switches for what implementations get wrong: ``Model()`` is the
correct loss, each :class:`Fault` in :data:`FAULTS` one or a few models that differ from it in
one way (a repeated label that may follow itself without a blank, no trailing blank state,
log(0) taken as a finite number, the loss divided by the target length, ...). Every model
gives the sample's loss and, where the fault defines one, its gradient w.r.t. the logits
the function was given. :mod:`ctcbench.caselib.fault_match` holds a function's numbers
against them.

Shape letters as in :mod:`ctcbench.core.problem`; per sample ``T_n`` valid frames, ``L_n``
labels, ``S`` extended states.
"""
from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from ctcbench.core.ctcmath import adjacent_repeats, log_softmax

FLOAT32_LOWEST = float(np.finfo(np.float32).min)  # -3.4028235e38
# how implementations with a finite log-zero spell it
LOG_ZEROS = (FLOAT32_LOWEST, float(np.finfo(np.float64).min), -1e30, -1e38, -1e10)


@dataclass(frozen=True)
class Model:
    """How one CTC loss computes a sample; the defaults are the correct loss.

    scores: what the recursion adds up: ``log_softmax`` of the logits, the raw ``logits``
      (normalisation skipped) or softmax ``probs`` taken as log-probabilities;
    frames: ``valid`` (the first ``T_n``) or ``all`` T (input lengths ignored);
    zero_length: an input length of 0 read as ``none`` (no frame), ``all`` T frames or the
      ``last`` frame (an index ``T_n - 1`` that wraps);
    blank: ``given``, ``zero`` (the argument ignored) or ``last`` (``C - 1``);
    past_length: the target read to its padded width, past ``target_lengths``;
    repeats: a label may follow itself without a blank between;
    leading, trailing: the extended states include the first / last blank;
    log_zero: what log(0) is (``-inf``, or a finite number);
    empty_end: for an empty target, its one state ``once`` (right), ``twice`` (two end
      states read, both the same one), or ``none`` (no end state: loss inf);
    scale: the loss (and gradient) ``none``, divided by the ``target`` or ``input`` length,
      or the ``batch`` sum of the correct losses (gradient undefined);
    grad_of: the gradient w.r.t. the ``logits`` or the ``log_probs``;
    nan_at_zero: the gradient NaN where a probability is 0 in the problem's dtype (a
      division by the softmax): at those ``entries``, on those ``frames``, or ``""``.
    """

    scores: str = "log_softmax"
    frames: str = "valid"
    zero_length: str = "none"
    blank: str = "given"
    past_length: bool = False
    repeats: bool = False
    leading: bool = True
    trailing: bool = True
    log_zero: float = -np.inf
    empty_end: str = "once"
    scale: str = "none"
    grad_of: str = "logits"
    nan_at_zero: str = ""

    def core(self) -> "Model":
        """The part of the model the recursion depends on (the rest is applied after)."""
        return replace(self, scale="none", grad_of="logits", nan_at_zero="")


CORRECT = Model()


@dataclass(frozen=True)
class Sample:
    """What one sample of a problem is, as the faults' conditions read it."""

    T: int
    C: int
    T_n: int
    L_n: int
    width: int  # padded target width
    blank: int
    repeats: int  # adjacent repeated labels in the target
    impossible: bool  # the correct loss is inf (too short, or a label of probability 0)
    batch: int  # N
    underflow: bool  # a probability of the target's classes is 0 in the problem's dtype


@dataclass(frozen=True)
class Result:
    """A model's answer on one sample: the loss, and ``grad (T, C)`` w.r.t. the logits as
    given (None where the model leaves it undefined)."""

    loss: float
    grad: np.ndarray | None


@dataclass(frozen=True)
class Fault:
    """One fault: its models (``forms``, each with what tells it apart), a short ``name``,
    the sentence ``says`` (``{form}`` filled from the form), and when it can show."""

    key: str
    name: str
    says: str
    forms: tuple[tuple[str, Model], ...]
    shows: object  # (Sample) -> bool: the fault can change this sample's answer
    reads_padding: bool = False  # its answer depends on what padded frames / labels hold

    def sentence(self, form: str) -> str:
        return self.says.format(form=form)


def _lz(value: float) -> str:
    return "float32's lowest" if value == FLOAT32_LOWEST else (
        "float64's lowest" if value == float(np.finfo(np.float64).min) else f"{value:g}")


FAULTS: tuple[Fault, ...] = (
    Fault("repeats", "repeated labels",
          "your loss lets a label follow itself without a blank",
          (("", Model(repeats=True)),), lambda s: s.repeats > 0),
    Fault("trailing_blank", "no trailing blank",
          "your loss has no state for a blank after the last label (no alignment may end "
          "in blank)", (("", Model(trailing=False)),), lambda s: s.L_n > 0),
    Fault("leading_blank", "no leading blank",
          "your loss has no state for a blank before the first label (no alignment may "
          "start with blank)", (("", Model(leading=False)),), lambda s: s.L_n > 0),
    Fault("log_zero", "finite log-zero",
          "your loss takes log(0) as a finite number ({form}): an impossible target scores "
          "a finite loss, not inf",
          tuple((_lz(k), Model(log_zero=k)) for k in LOG_ZEROS),
          lambda s: s.impossible and s.T_n > 0),  # no frame: implementations differ
    Fault("zero_length", "zero-length input",
          "your loss reads an input length of 0 as {form}",
          (("all T frames", Model(zero_length="all")),
           ("the last frame (index -1 wraps)", Model(zero_length="last"))),
          lambda s: s.T_n == 0 and s.T > 0, reads_padding=True),
    Fault("empty_target", "empty target",
          "your loss reads the wrong end state for an empty target: {form}",
          (("its one state counted twice (loss too small by log 2)", Model(empty_end="twice")),
           ("none read (loss inf)", Model(empty_end="none"))),
          lambda s: s.L_n == 0 and s.T_n > 0),
    Fault("probs", "probabilities as log-probs",
          "your loss takes softmax probabilities where log-probabilities are expected",
          (("", Model(scores="probs")),), lambda s: s.T_n > 0),
    Fault("logits", "logits not normalised",
          "your loss skips log_softmax: it adds up raw logits as if they were log-probabilities",
          (("", Model(scores="logits")),), lambda s: s.T_n > 0),
    Fault("per_target", "divided by target length",
          "your loss is divided by the target length (torch's reduction='mean' does that "
          "before averaging; the per-sample loss must not)",
          (("", Model(scale="target")),), lambda s: s.L_n > 1),
    Fault("per_input", "divided by input length",
          "your loss is divided by the input length", (("", Model(scale="input")),),
          lambda s: s.T_n > 1),
    Fault("batch_sum", "batch sum",
          "your loss gives the sum over the batch where one loss per sample is expected",
          (("", Model(scale="batch")),), lambda s: s.batch > 1),
    Fault("blank_zero", "blank argument ignored",
          "your loss ignores the blank argument and takes class 0 as the blank",
          (("", Model(blank="zero")),), lambda s: s.blank != 0),
    Fault("blank_last", "blank as C-1",
          "your loss takes class C-1 as the blank whatever the blank argument says",
          (("", Model(blank="last")),), lambda s: s.blank != s.C - 1),
    Fault("past_length", "targets read past their length",
          "your loss reads the padding after target_lengths as labels",
          (("", Model(past_length=True)),), lambda s: s.L_n < s.width, reads_padding=True),
    Fault("padded_frames", "padded frames read",
          "your loss ignores input_lengths and reads all T frames, padding included",
          (("", Model(frames="all")),), lambda s: s.T_n < s.T, reads_padding=True),
    Fault("grad_log_probs", "gradient w.r.t. log-probs",
          "your gradient is the one w.r.t. the log-probabilities where the logits' was meant "
          "(softmax's Jacobian left out)", (("", Model(grad_of="log_probs")),),
          lambda s: s.T_n > 0 and not s.impossible),
    Fault("nan_softmax", "NaN from a division by the softmax",
          "your gradient is NaN where a probability is 0 in the input's dtype: it divides by "
          "the softmax",
          (("at those entries", Model(nan_at_zero="entries")),
           ("on those frames", Model(nan_at_zero="frames"))),
          lambda s: s.underflow and not s.impossible),
)
BY_KEY = {f.key: f for f in FAULTS}


# -- one sample -------------------------------------------------------------------------------
@dataclass(frozen=True)
class Inputs:
    """A problem's arrays as the function under test was handed them."""

    logits: np.ndarray  # (T, N, C) float64, padded frames as the function saw them
    targets: np.ndarray  # (N, W) int, padding as the function saw it


def inputs_of(problem, raw_targets=None) -> list[Inputs]:
    """The ways a function may have seen ``problem``: padded frames as zeros and padding
    labels as the blank (ctcbench's problem), then as the case wrote them, where that
    differs (``raw_targets (N, W)``, the case's own padded targets)."""
    clean = Inputs(problem.clean_logits(np.float64), np.asarray(problem.targets))
    written = problem.logits.astype(np.float64)  # (T, N, C)
    targets = clean.targets
    if raw_targets is not None and np.ndim(raw_targets) == 2 \
            and np.shape(raw_targets)[0] == problem.shape[1]:
        targets = np.asarray(raw_targets, dtype=np.int64)
    same = np.array_equal(written, clean.logits, equal_nan=True) \
        and np.array_equal(targets, clean.targets)
    return [clean] if same else [clean, Inputs(written, targets)]


def _extended(labels: np.ndarray, blank: int, model: Model):
    """Extended states ``(S,)``, which may be entered by skipping one ``(S,)``, and the start
    and end states, as ``model`` builds them."""
    L = len(labels)
    if L == 0:
        return np.array([blank]), np.zeros(1, bool), [0], [0]
    ext = np.full(2 * L + 1, blank, dtype=np.int64)
    ext[1::2] = labels
    if not model.leading:
        ext = ext[1:]
    if not model.trailing:
        ext = ext[:-1]
    S = len(ext)
    skip = np.zeros(S, bool)
    skip[2:] = ext[2:] != blank
    if not model.repeats:
        skip[2:] &= ext[2:] != ext[:-2]
    starts = [0, 1] if model.leading else [0]
    ends = [S - 1, S - 2] if model.trailing else [S - 1]
    return ext, skip, starts, ends


def _add(*terms):
    """log(sum(exp(terms))), NaN kept."""
    out = terms[0]
    for x in terms[1:]:
        out = np.logaddexp(out, x)
    return out


def _shift(v: np.ndarray, k: int, fill: float) -> np.ndarray:
    """``v`` moved ``k`` places right (left for k < 0) along its last axis, ``fill`` coming in."""
    out = np.full_like(v, fill)
    if k > 0:
        out[k:] = v[:-k]
    else:
        out[:k] = v[-k:]
    return out


def _forward_backward(e: np.ndarray, skip, starts, ends, log_zero: float, grad: bool):
    """Log-likelihood of the paths through ``e (F, S)`` (the scores of the extended states on
    the frames read) and the occupancy ``(F, S)`` of each state (None unless ``grad``)."""
    F, S = e.shape
    a = np.full((F, S), log_zero)
    a[0, starts] = e[0, starts]
    with np.errstate(invalid="ignore", over="ignore"):
        for t in range(1, F):
            prev = a[t - 1]
            a[t] = _add(prev, _shift(prev, 1, -np.inf),
                        np.where(skip, _shift(prev, 2, -np.inf), -np.inf)) + e[t]
        ll = float(_add(*a[-1, ends])) if len(ends) > 1 else float(a[-1, ends[0]])
        if not grad or not np.isfinite(ll):
            return ll, None
        b = np.full((F, S), log_zero)
        b[-1, ends] = e[-1, ends]
        into = _shift(skip, -2, False)  # (S,) s + 2 may be entered from s
        for t in range(F - 2, -1, -1):
            nxt = b[t + 1]
            b[t] = _add(nxt, _shift(nxt, -1, -np.inf),
                        np.where(into, _shift(nxt, -2, -np.inf), -np.inf)) + e[t]
        occ = np.where(np.isneginf(e), 0.0, np.exp(a + b - np.where(np.isneginf(e), 0, e) - ll))
    return ll, occ


def _scores(x: np.ndarray, how: str) -> np.ndarray:
    """``(F, C)`` what the recursion adds up, from logits ``x (F, C)``."""
    if how == "logits":
        return x
    lp = log_softmax(x)
    return np.exp(lp) if how == "probs" else lp


def _to_logits(x: np.ndarray, d_scores: np.ndarray, how: str) -> np.ndarray:
    """``(F, C)`` the gradient w.r.t. the logits from the one w.r.t. the scores."""
    if how == "logits":
        return d_scores
    lp = log_softmax(x)
    p = np.exp(lp)  # (F, C)
    if how == "probs":  # d/dx of softmax: p * (g - <p, g>)
        return p * (d_scores - (p * d_scores).sum(-1, keepdims=True))
    return d_scores - p * d_scores.sum(-1, keepdims=True)  # d/dx of log_softmax


def _core(x: np.ndarray, row: np.ndarray, T_n: int, L_n: int, blank: int, model: Model,
          grad: bool):
    """``(loss, grad w.r.t. the logits (T, C) or None, grad w.r.t. the scores (T, C) or None)``
    of one sample under ``model``'s recursion; ``x (T, C)`` logits and ``row (W,)`` the target
    as given."""
    T, C = x.shape
    if model.frames == "all":
        frames = np.arange(T)
    elif T_n == 0 and model.zero_length != "none" and T > 0:
        frames = np.arange(T) if model.zero_length == "all" else np.array([T - 1])
    else:
        frames = np.arange(T_n)
    b = {"given": blank, "zero": 0, "last": C - 1}[model.blank]
    labels = np.asarray(row if model.past_length else row[:L_n], dtype=np.int64) % C
    ext, skip, starts, ends = _extended(labels, b, model)
    zero = np.zeros((T, C))
    if len(frames) == 0:
        ll = 0.0 if len(labels) == 0 else model.log_zero
        return -ll if ll != -np.inf else np.inf, zero, zero
    xs = x[frames]  # (F, C)
    e = _scores(xs, model.scores)[:, ext]  # (F, S)
    ll, occ = _forward_backward(e, skip, starts, ends, model.log_zero, grad)
    if len(labels) == 0 and model.empty_end != "once":
        ll = ll + np.log(2.0) if model.empty_end == "twice" else -np.inf
        occ = None if model.empty_end == "none" else occ
    if np.isnan(ll):
        return np.nan, None, None  # NaN read: where the gradient is NaN is the code's own
    if ll == -np.inf:
        return np.inf, zero, zero  # no path: infinite, gradient 0
    if np.isfinite(model.log_zero) and ll <= model.log_zero / 2:
        return -ll, None, None  # every path through log(0): the gradient is the model's own
    if not grad:
        return -ll, None, None
    gamma = np.zeros((len(frames), C))
    np.add.at(gamma.T, ext, occ.T)  # (F, C) mass of the paths on each class
    d_scores, d_logits = zero.copy(), zero.copy()
    d_scores[frames] = -gamma
    d_logits[frames] = _to_logits(xs, -gamma, model.scores)
    return -ll, d_logits, d_scores


class Evaluator:
    """Models on one problem, each sample's recursion computed once (the forms of several
    faults share it)."""

    def __init__(self, problem, inputs: list[Inputs] | None = None):
        self.problem, self.inputs = problem, inputs or inputs_of(problem)
        self._cache: dict = {}
        self._totals: dict = {}
        self._zero = None

    def zero_probs(self) -> np.ndarray:
        """``(T, N, C)`` bool: the valid entries whose probability is 0 in the problem's
        dtype (float32 for bfloat16, as it is held)."""
        if self._zero is None:
            p = self.problem
            held = np.float32 if p.dtype in ("float32", "bfloat16") else np.dtype(p.dtype)
            with np.errstate(under="ignore"):
                self._zero = (np.exp(p.log_probs().astype(held)) == 0) & p.frame_mask[..., None]
        return self._zero

    def sample(self, n: int) -> Sample:
        """The facts about sample ``n`` the faults' conditions read."""
        p = self.problem
        T, N, C, W = p.shape
        T_n, L_n = int(p.input_lengths[n]), int(p.target_lengths[n])
        labels = p.targets[n, :L_n]
        reps = int(adjacent_repeats(labels))
        classes = np.append(labels, p.blank)
        impossible = self.core(CORRECT, n, grad=False)[0] == np.inf
        return Sample(T, C, T_n, L_n, W, p.blank, reps, impossible, N,
                      bool(self.zero_probs()[:, n][:, classes].any()))

    def nan_mask(self, n: int, view: int, how: str) -> np.ndarray:
        """``(T, C)`` where a gradient that divides by the softmax is NaN: the classes of the
        extended states whose probability is 0 in the problem's dtype (``entries``), or
        every class of such a frame (``frames``)."""
        p = self.problem
        C = p.shape[2]
        row = self.inputs[view].targets[n][:int(p.target_lengths[n])]
        classes = np.zeros(C, bool)
        classes[np.append(np.asarray(row, dtype=np.int64) % C, p.blank)] = True
        mask = self.zero_probs()[:, n] & classes[None, :]  # (T, C)
        return np.repeat(mask.any(axis=1, keepdims=True), C, axis=1) if how == "frames" else mask

    def core(self, model: Model, n: int, view: int = 0, grad: bool = True):
        """``_core`` of ``model``'s recursion on sample ``n`` seen as ``view``, cached."""
        key = (model.core(), n, view, grad)
        if key not in self._cache:
            if not grad and (model.core(), n, view, True) in self._cache:
                return self._cache[model.core(), n, view, True]
            p, inp = self.problem, self.inputs[view]
            self._cache[key] = _core(inp.logits[:, n], inp.targets[n],
                                     int(p.input_lengths[n]), int(p.target_lengths[n]),
                                     p.blank, model.core(), grad)
        return self._cache[key]

    def result(self, model: Model, n: int, view: int = 0) -> Result:
        """``model``'s loss and gradient on sample ``n``, the inputs seen as ``view``."""
        if model.scale == "batch":
            return Result(self.batch_total(view), None)
        loss, d_logits, d_scores = self.core(model, n, view)
        grad = d_scores if model.grad_of == "log_probs" else d_logits
        p = self.problem
        divisor = {"none": 1, "target": max(int(p.target_lengths[n]), 1),
                   "input": max(int(p.input_lengths[n]), 1)}[model.scale]
        loss = loss / divisor
        if grad is not None:
            grad = grad / divisor
            if model.nan_at_zero and np.isfinite(loss):  # an impossible target: no division
                grad = np.where(self.nan_mask(n, view, model.nan_at_zero), np.nan, grad)
        return Result(float(loss), grad)

    def batch_total(self, view: int = 0) -> float:
        """The sum over the batch of the correct losses (a loss that sums where one per
        sample is wanted gives it for each)."""
        if view not in self._totals:
            self._totals[view] = float(sum(self.core(CORRECT, n, view, grad=False)[0]
                                           for n in range(self.problem.shape[1])))
        return self._totals[view]

    def fault_results(self, fault: Fault, n: int) -> list[tuple[str, Result]]:
        """``(form, result)`` of each of ``fault``'s forms on sample ``n``, for each way the
        function may have seen its inputs where the fault reads padding."""
        views = range(len(self.inputs)) if fault.reads_padding else (0,)
        return [(form, self.result(model, n, view)) for form, model in fault.forms
                for view in views]
