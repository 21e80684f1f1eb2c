"""A user's own CTC function as a backend: ``ctcbench compare --function PKG.MOD:NAME``.

The function is imported in its worker process only (``isolated``: a segfault costs the
worker), called in one of four conventions, and its gradient taken by its framework:

- ``torch``: ``f(log_probs (T, N, C), targets (N, S) or (sum S,), input_lengths (N,),
  target_lengths (N,), blank=, reduction="none")`` -> loss ``(N,)``, as
  ``torch.nn.functional.ctc_loss``; the log-probs are ``log_softmax(logits)`` and the gradient
  is autograd's, w.r.t. the logits (on padded frames, the function's own gradient w.r.t. its
  log-probs there: log_softmax's backward through a NaN frame would be NaN whatever the
  function did);
- ``optax``: ``f(logits (N, T, C), logit_paddings (N, T), labels (N, S), label_paddings
  (N, S), blank_id=)`` -> loss ``(N,)``, as ``optax.ctc_loss``; the gradient by ``jax.grad``,
  under ``jax.jit`` where the function traces (said in the notes);
- ``keras``: ``f(target (N, S), output (N, T, C) logits, target_length, output_length,
  mask_index=)`` -> loss ``(N,)``, as ``keras.ops.ctc_loss``, on the installed Keras backend;
- ``numpy``: ``f(logits (T, N, C), targets (N, S), input_lengths, target_lengths, blank=)``
  -> ``(loss (N,), grad (T, N, C))``, the gradient of ``loss.sum()`` w.r.t. the logits.

The convention is read from the names of the first four parameters where they are those of
the library named; a function whose parameters do not say is called in ``convention``. A ``blank``
argument the function lacks means it handles blank 0 only; a ``reduction`` one is passed
``"none"``. The function sees each case as it is written: padded frames hold what the case
puts there (NaN, 1e30), ``-inf`` logits stay ``-inf``, targets and lengths keep their integer
type, and a torch-convention function gets concatenated targets where the case gives them
so and it takes them. When the worker starts, a two-frame problem probes which dtypes the
function computes in and, for torch, which target layouts it takes; every result's first
note says what was found. Where the probe fails, its message says why: a tuple returned, a
loss of another shape than ``(N,)``, a reduction, log-probs where logits are handed over.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import re
from dataclasses import dataclass

import numpy as np

from ctcbench.core.ctcmath import log_softmax, paths_collapsing_to
from ctcbench.core.problem import FLOAT_DTYPES, CTCProblem
from ctcbench.errors import InputError, fail
from ctcbench.runtime.function_calls import (CALLS, Call, CallMismatch, as_dtype, kind_of,
                                             shape_of)
from ctcbench.runtime.protocol import BackendResult, UnsupportedProblem

OPTION = "--function"
TARGET_LAYOUTS = ("padded", "concatenated")  # the target layouts CTCProblem.target_layout names


@dataclass(frozen=True)
class Convention:
    """A calling convention: the parameter names that identify it, what it imports, the
    name of its blank argument, the extra that installs its framework, and what it hands the
    function as scores (``"log-probs"`` or ``"logits"``)."""

    name: str
    params: tuple[str, ...]
    blank: str
    needs: tuple[str, ...]
    extra: str
    scores: str = "logits"


CONVENTIONS = {c.name: c for c in (
    Convention("torch", ("log_probs", "targets", "input_lengths", "target_lengths"), "blank",
               ("torch",), "torch", "log-probs"),
    Convention("optax", ("logits", "logit_paddings", "labels", "label_paddings"), "blank_id",
               ("jax",), "jax"),
    Convention("keras", ("target", "output", "target_length", "output_length"), "mask_index",
               ("keras",), "keras"),
    Convention("numpy", ("logits", "targets", "input_lengths", "target_lengths"), "blank",
               ("numpy",), "numpy"),
)}
READ_OFF = ("torch", "optax", "keras")  # recognised by parameter names; numpy must be named


def parameters(fn) -> list[str]:
    try:
        return list(inspect.signature(fn).parameters)
    except (TypeError, ValueError):  # a builtin without a signature: the caller names it
        return []


def convention_of(fn, asked: str | None, target: str) -> Convention:
    """The convention ``fn``'s parameter names state, else the one ``asked`` for (so one
    ``--convention`` serves the functions whose parameters do not say)."""
    names = parameters(fn)
    for name in READ_OFF:
        if tuple(names[:4]) == CONVENTIONS[name].params:
            return CONVENTIONS[name]
    if asked is not None:
        return CONVENTIONS[asked]
    fail("--convention", f"one of {', '.join(CONVENTIONS)}: {target}'s parameters "
         f"({', '.join(names) or 'unknown'}) are not those of torch's, optax's or keras' "
         f"ctc_loss", "none")


def convention_in(notes, target: str) -> str | None:
    """The convention a result's first note (written by :class:`FunctionBackend`) names."""
    first = notes[0] if notes else ""
    m = re.match(rf"{re.escape(target)}: (\w+) convention", first)
    return m.group(1) if m and m.group(1) in CONVENTIONS else None


def load_function(target: str):
    """The callable at ``"pkg.mod:name"`` (a dotted name after the colon reaches into a class)."""
    module, _, attr = target.partition(":")
    try:
        obj = importlib.import_module(module)
    except ImportError as exc:
        fail(OPTION, f"an importable module {module!r}", f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # the module itself raised on import
        fail(OPTION, f"a module {module!r} that imports", f"{type(exc).__name__}: {exc}")
    for part in attr.split("."):
        if not hasattr(obj, part):
            fail(OPTION, f"a name {attr!r} in {module}", f"none (it has "
                 f"{', '.join(n for n in dir(obj) if not n.startswith('_'))[:200] or 'nothing'})")
        obj = getattr(obj, part)
    if not callable(obj):
        fail(OPTION, "a callable CTC function", f"{target} = {type(obj).__name__}")
    return obj


PROBE_LOGITS = np.array([[[0.5, -0.2, 0.1], [0.2, 0.4, -0.3]],
                         [[0.3, 0.2, -0.4], [-0.1, 0.6, 0.0]]])  # (T=2, N=2, C=3), unnormalised
PROBE_TARGETS = ((1,), (2,))


def probe_problem(dtype: str = "float64", logits=PROBE_LOGITS) -> CTCProblem:
    """The two-frame, two-sample problem every function is probed on, in ``dtype``."""
    return CTCProblem(as_dtype(np.asarray(logits, np.float64), dtype), [list(t) for t in PROBE_TARGETS],
                      [2, 2], [len(t) for t in PROBE_TARGETS])


def _probe_losses(scores: np.ndarray) -> np.ndarray:
    """``(N,)`` CTC losses of the probe problem with ``scores (T, N, C)`` taken as log-probs."""
    T, N, C = scores.shape
    out = []
    for n, target in enumerate(PROBE_TARGETS):
        paths = paths_collapsing_to(T, C, target)  # (P, T)
        out.append(-np.logaddexp.reduce(scores[np.arange(T)[None, :], n, paths].sum(axis=1)))
    return np.array(out)


def per_sample_loss(value, N: int, target: str, *, reduced: bool):
    """``value`` unless it is no ``(N,)`` loss: then :class:`CallMismatch` saying what it is
    and what to return. ``reduced``: whether the call asked for ``reduction="none"``."""
    want = f"one loss per sample is shape (N,) = ({N},)"
    if isinstance(value, (tuple, list)):
        shapes = [shape_of(v) for v in value]
        loss = [i for i, v in enumerate(value) if tuple(getattr(v, "shape", ())) == (N,)]
        which = (f"return only element {loss[0]}, which has that shape (f(...)[{loss[0]}])"
                 if len(loss) == 1 else "return only the per-sample loss")
        raise CallMismatch(target, f"a {type(value).__name__} of {len(value)} "
                           f"({', '.join(shapes)})", f"{which}; {want}")
    shape = getattr(value, "shape", None)
    if shape is None:
        raise CallMismatch(target, kind_of(value), f"return an array; {want}")
    shape = tuple(shape)
    if shape == (N,):
        return value
    if shape in ((), (1,)):
        how = ("although reduction='none' was passed" if reduced else "pass reduction='none' "
               "or return the losses before any sum or mean")
        raise CallMismatch(target, f"a loss of shape {shape} for N = {N} samples",
                           f"it reduces the batch (a sum or a mean), {how}; {want}")
    if shape in ((N, 1), (1, N)):
        raise CallMismatch(target, f"a loss of shape {shape}",
                           f"drop the axis of length 1 (loss.reshape(-1)); {want}")
    raise CallMismatch(target, f"a loss of shape {shape}", f"{want}, no reduction")


class FunctionBackend:
    """``target``'s function in ``convention`` (``None``: read off its parameters) on
    ``device`` (torch's; ``"cpu"`` or ``"cuda"``); ``known_issues``: its implementer's."""

    isolated = True

    def __init__(self, target: str, convention: str | None = None, device: str = "cpu",
                 known_issues: dict | None = None):
        self.target, self.asked, self.device = target, convention, device
        self.known_issues = dict(known_issues or {})  # "case/dtype" glob -> reason
        self.fn = self.convention = None
        self.dtypes_found, self.layouts, self.notes = (), ("padded",), []

    # -- in the worker --------------------------------------------------------------------
    def prepare(self) -> None:
        """Import the function and its framework, then probe it on a two-frame problem."""
        self.fn = load_function(self.target)
        self.convention = c = convention_of(self.fn, self.asked, self.target)
        missing = [m for m in c.needs if importlib.util.find_spec(m) is None]
        if missing:
            fail(OPTION, f"{c.name}'s framework installed for {self.target}",
                 f"{', '.join(missing)} missing (pip install 'ctcbench[{c.extra}]')")
        self.params = parameters(self.fn)
        self.call = CALLS[c.name](self)
        read = ("read off its parameters" if c.name in READ_OFF
                and tuple(parameters(self.fn)[:4]) == c.params else "named by --convention")
        self.dtypes_found = self._probe()
        warning = self._scores_warning()
        self.notes = [f"{self.target}: {c.name} convention ({read}); "
                      f"{'takes' if self._takes(c.blank) else 'no'} {c.blank} argument; "
                      f"targets {self._layout_note()}; computes in "
                      f"{', '.join(self.dtypes_found)} (probed){self.call.note}"
                      + (f"; warning: {warning}" if warning else "")]

    def _takes(self, name: str) -> bool:
        return name in self.params or any(
            p.kind is p.VAR_KEYWORD for p in inspect.signature(self.fn).parameters.values())

    def _layout_note(self) -> str:
        if self.convention.name != "torch" or len(self.layouts) == len(TARGET_LAYOUTS):
            return " and ".join(self.layouts)
        other = next(x for x in TARGET_LAYOUTS if x not in self.layouts)
        return f"{self.layouts[0]} only ({other} ones are given {self.layouts[0]})"

    def _probe(self) -> tuple[str, ...]:
        """The dtypes the probe problem runs in, and (torch) the target layouts it takes; an
        InputError naming ``--function`` that says why when it runs in none."""
        found, failed, layouts = [], {}, None
        for dtype in FLOAT_DTYPES:
            if dtype == "bfloat16" and self.convention.name != "torch":
                continue  # NumPy has none, so only a torch tensor can carry it
            problem = probe_problem(dtype)
            took, tried = [], layouts or self._probe_layouts()
            for layout in tried:
                try:
                    self._run(problem, None, layout=layout)
                except InputError:
                    raise
                except CallMismatch as exc:  # what it returns: no dtype is to blame
                    if layout == tried[0]:  # (another layout it may just not take)
                        fail(OPTION, f"a CTC function in the {self.convention.name} "
                             f"convention that returns one loss per sample", str(exc)[:600])
                    continue
                except Exception as exc:
                    failed.setdefault(dtype, f"{type(exc).__name__}: {exc}")
                    continue
                took.append(layout)
            if took:
                found.append(dtype)
                layouts = layouts or tuple(took)  # the layouts of the first dtype that ran
        if not found:
            fail(OPTION, f"a CTC function that runs in the {self.convention.name} convention "
                 "on a two-frame problem", self._why_not(failed)[:600])
        self.layouts = layouts
        return tuple(found)

    def _probe_layouts(self) -> tuple[str, ...]:
        return TARGET_LAYOUTS if self.convention.name == "torch" else ("padded",)

    def _why_not(self, failed: dict[str, str]) -> str:
        """What the probe's calls raised, the dtype named only where the errors differ by
        dtype, and what a retry shows (no reduction asked, other scores handed over)."""
        errors = list(dict.fromkeys(failed.values()))
        said = (f"{self.target} raised {errors[0]}" if len(errors) == 1 else
                f"{self.target} raised " + "; ".join(f"in {d}: {e}" for d, e in failed.items()))
        dtype = "float64" if "float64" in failed else next(iter(failed))
        for retry, change, fix in self._retries():
            try:
                retry(probe_problem(dtype))
            except CallMismatch as exc:
                return f"{said}; {change}, it returns {exc.what}: {fix or exc.fix}"
            except Exception:
                continue
            return f"{said}; {change}, it runs" + (f": {fix}" if fix else "")
        return said

    def _retries(self):
        """``(call, what it changes, what to do where it then runs or None)`` tried on a probe
        that failed, to say why it did."""
        c = self.convention
        if c.name == "torch" and self._takes("reduction"):
            yield (lambda p: self._run(p, None, reduction=False),
                   "called without the reduction='none' ctcbench passes",
                   "make reduction='none' return one loss per sample, shape (N,)")
        if c.scores == "log-probs":
            yield (lambda p: self._run(p, None, probabilities=True),
                   f"handed probabilities instead of the log-probabilities the {c.name} "
                   f"convention hands over (log_softmax(logits), as torch's ctc_loss takes them)",
                   None)
        else:
            yield (lambda p: self._run(p.with_logits(log_softmax(p.logits)), None),
                   f"handed log-probabilities instead of the unnormalised logits the {c.name} "
                   f"convention hands over (to which the function applies log_softmax, as "
                   f"{c.name}'s ctc_loss does; --convention torch hands log-probs)", None)

    def _scores_warning(self) -> str | None:
        """Where the probe's losses show the scores read in another convention: NaN (the log
        of log-probs taken), or the loss of logits taken as log-probs."""
        dtype = next((d for d in ("float64", "float32") if d in self.dtypes_found), None)
        if dtype is None:
            return None
        loss, _ = self._run(probe_problem(dtype), None)
        right = _probe_losses(log_softmax(PROBE_LOGITS))
        if np.isnan(loss).all():
            return (f"its losses on the two-frame probe are NaN (want {right.round(4).tolist()}): "
                    f"does it take the log of its input? The {self.convention.name} convention "
                    f"hands it {self.convention.scores}")
        wrong = _probe_losses(PROBE_LOGITS)
        if self.convention.scores == "logits" and np.allclose(loss, wrong, rtol=1e-4) \
                and not np.allclose(loss, right, rtol=1e-4):
            return (f"its losses on the two-frame probe, {loss.round(4).tolist()}, are those "
                    f"of the logits taken as log-probabilities (want {right.round(4).tolist()}, "
                    f"after log_softmax): the {self.convention.name} convention hands it "
                    f"unnormalised logits")
        return None

    def run(self, problem: CTCProblem, *, grad_weights=None) -> BackendResult:
        if self.fn is None:
            self.prepare()
        if problem.dtype == "bfloat16" and self.convention.name != "torch":
            raise UnsupportedProblem(f"the {self.convention.name} convention has no bfloat16 "
                                     f"(NumPy has none)")
        if problem.dtype not in self.dtypes_found:
            raise UnsupportedProblem(f"{self.target} did not run in {problem.dtype} when "
                                     f"probed (it ran in {', '.join(self.dtypes_found)})")
        if problem.blank % problem.shape[2] != 0 and not self._takes(self.convention.blank):
            raise UnsupportedProblem(f"{self.target} takes no {self.convention.blank} "
                                     f"argument, so it is tried on blank 0 only")
        layout = problem.target_layout if problem.target_layout in self.layouts else None
        loss, grad = self._run(problem, grad_weights, layout=layout)
        return BackendResult(loss, grad, compute_dtype=problem.dtype, notes=list(self.notes))

    def _run(self, problem: CTCProblem, grad_weights, *, layout: str | None = None,
             reduction: bool = True, probabilities: bool = False):
        """``(loss (N,), grad (T, N, C))`` float64 of one call. ``layout``: the targets' layout
        (default the first the function takes); ``reduction=False`` leaves out the
        ``reduction`` argument and ``probabilities=True`` hands a torch-convention function
        probabilities: what the probe tries to say why a call failed."""
        T, N, C, _ = problem.shape
        w = np.ones(N) if grad_weights is None else np.asarray(grad_weights, np.float64)
        kwargs = {}
        if self._takes(self.convention.blank):
            kwargs[self.convention.blank] = problem.blank % C
        reduced = reduction and self.convention.name == "torch" and self._takes("reduction")
        if reduced:
            kwargs["reduction"] = "none"
        call = Call(problem, w, kwargs, layout or self.layouts[0], reduced, probabilities)
        loss, grad = self.call(call)
        loss, grad = np.asarray(loss, np.float64), np.asarray(grad, np.float64)
        if grad.shape != (T, N, C):
            raise CallMismatch(self.target, f"a gradient of shape {grad.shape}",
                               f"the gradient is shape (T, N, C) = {(T, N, C)}")
        return loss, grad

    def checked_loss(self, value, N: int, reduced: bool = False):
        """``value`` if it is one loss per sample, else :class:`CallMismatch`."""
        return per_sample_loss(value, N, self.target, reduced=reduced)
