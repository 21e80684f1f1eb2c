"""The backend contract in one place: what a backend must have, what it may declare, what it
returns, and the exceptions it raises.

A backend is any object with ``run(problem, *, grad_weights=None)`` (:class:`Backend`). Every
other attribute is optional; :class:`BackendTraits` lists each one with its default and
meaning, and ``BackendTraits.of(backend)`` reads them, so drivers and the worker never guess a
default of their own. :func:`read_traits` is the one reader of any kind's traits (the
decoders' ``DecoderTraits`` too). Shape letters are those of
:mod:`ctcbench.core.problem` (``T`` frames, ``N`` batch, ``C`` classes incl. blank).
"""
from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ctcbench.core.arrays import to_numpy
from ctcbench.core.problem import FLOAT_DTYPES
from ctcbench.errors import InputError, one_of
from ctcbench.runtime.status import Status

DEFAULT_TIMEOUT_S = 120.0  # per problem; the first problem of a shape may include a JIT compile
DEFAULT_STARTUP_TIMEOUT_S = 300.0  # spawn + framework import


# -- exceptions -------------------------------------------------------------------------------
class BackendUnavailable(RuntimeError):
    """The backend cannot run here; ``reason`` says why and ``hint`` how to fix it."""

    def __init__(self, reason: str, hint: str | None = None):
        super().__init__(reason if hint is None else f"{reason} ({hint})")
        self.reason = reason
        self.hint = hint


class UnsupportedProblem(ValueError):
    """The backend runs here but cannot take this problem (a dtype, a layout, a size)."""


class BackendFailure(RuntimeError):
    """An isolated backend's worker process died or hung on one problem.

    ``status`` is the word a driver records for the case (``"crashed"`` or ``"timeout"``);
    the worker has been restarted when this is raised, so the run can go on.
    """

    status = Status.ERROR


class BackendCrashed(BackendFailure):
    """The worker process died: ``signal`` (e.g. ``"SIGSEGV"``) or ``exitcode`` says how."""

    status = Status.CRASHED

    def __init__(self, message: str, *, signal: str | None = None, exitcode: int | None = None):
        super().__init__(message)
        self.signal = signal
        self.exitcode = exitcode


class BackendTimeout(BackendFailure):
    """The worker did not answer within ``timeout_s`` seconds and was killed."""

    status = Status.TIMEOUT

    def __init__(self, message: str, *, timeout_s: float):
        super().__init__(message)
        self.timeout_s = timeout_s


# -- what run() returns -----------------------------------------------------------------------
@dataclass
class BackendResult:
    """What a backend returns, normalised: float64 NumPy arrays plus what was really done.

    A backend may return any object with ``.loss`` and ``.grad_logits`` (NumPy arrays or
    torch tensors) and, optionally, ``.compute_dtype`` and ``.notes``; :func:`as_result`
    checks it and makes one of these.
    """

    loss: np.ndarray  # (N,) float64, +inf where the target is infeasible
    grad_logits: np.ndarray  # (T, N, C) float64, zero on padded frames and infeasible samples
    compute_dtype: str | None = None  # the dtype the backend really computed in
    notes: list[str] = field(default_factory=list)
    raw: object = field(default=None, repr=False)  # what the backend returned, with any extras


# -- the backend ------------------------------------------------------------------------------
@runtime_checkable
class Backend(Protocol):
    """A CTC implementation ctcbench can check and time.

    Required: ``run(problem, *, grad_weights=None)`` taking a
    :class:`~ctcbench.core.problem.CTCProblem` and returning an object with
      ``loss``:        ``(N,)`` per-sequence loss, no reduction (``+inf`` where the target is
                       infeasible);
      ``grad_logits``: ``(T, N, C)`` gradient of ``sum(w * loss)`` over the finite losses
                       w.r.t. the logits, zero on padded frames and for infeasible samples;
    where ``w`` is ``grad_weights`` ``(N,)``, the upstream gradient of each loss (default
    ones). A backend whose ``run`` has no ``grad_weights`` keyword is still a backend:
    drivers mark the cases that need it ``unsupported`` (see :func:`run_takes`).

    Constructing a backend must be cheap and must raise :class:`BackendUnavailable` when it
    cannot run here (package missing, no GPU); a problem it cannot take (a dtype, a size)
    raises :class:`UnsupportedProblem` from ``run``.

    Optional attributes (``isolated``, ``dtypes``, ``device``, ``known_issues``,
    ``packages``, ``timeout_s``, ``startup_timeout_s``, ``prepare``, ``nondeterministic``,
    ``compile_ahead``) are listed with their defaults in :class:`BackendTraits`; they are not
    protocol members, so a plugin with only ``run`` satisfies ``isinstance(plugin, Backend)``.
    """

    def run(self, problem, *, grad_weights=None) -> Any: ...

    # Optional, not protocol members: ``run_reduced(problem, *, reduction, zero_infinity)``,
    # the backend's own reduction (see BackendTraits.runs_reduced); ``kernel(problem)``, what
    # `bench` times (see BackendTraits.has_kernel and kernel_call); ``raw_ctc(logits,
    # targets, input_lengths, target_lengths, *, blank)``, the framework's own call on arrays
    # no CTCProblem has checked (see BackendTraits.has_raw_ctc and call_raw).


def run_takes(backend, keyword: str) -> bool:
    """Whether ``backend.run`` accepts ``keyword`` (by name, or through ``**kwargs``)."""
    try:
        params = inspect.signature(backend.run).parameters
    except (AttributeError, TypeError, ValueError):
        return False
    return keyword in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def kernel_call(backend, problem, traits: "BackendTraits | None" = None) -> Callable[[], object]:
    """What `bench` times for ``backend`` on ``problem``: ``backend.kernel(problem)`` where it
    has one, else a call of ``run(problem)`` on the exact shape (no bucket padding)."""
    traits = traits or BackendTraits.of(backend)
    if traits.has_kernel:
        return backend.kernel(problem)
    kwargs = {"exact_shape": True} if traits.takes_exact_shape else {}
    return lambda: backend.run(problem, **kwargs)


# Each check returns the trait's normalised value or raises TypeError; read_traits turns that
# into one ValueError naming the class, the attribute and what was expected.
def _strings(value) -> tuple[str, ...]:
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise TypeError
    return tuple(value)


def _dtypes(value):
    if value is None:
        return None
    names = _strings(value)
    if not names or not set(names) <= set(FLOAT_DTYPES):
        raise TypeError
    return names


def _seconds(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0 \
            or math.isinf(value):
        raise TypeError
    return float(value)


def _issues(value) -> Mapping[str, str]:
    if not isinstance(value, Mapping) or not all(isinstance(k, str) and isinstance(v, str)
                                                 for k, v in value.items()):
        raise TypeError
    return MappingProxyType(dict(value))


def _flag(value) -> bool:
    if not isinstance(value, bool):
        raise TypeError
    return value


def _callable_or_none(value):
    if value is not None and not callable(value):
        raise TypeError
    return value


def _tolerance_or_none(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0 \
            or math.isinf(value):
        raise TypeError
    return float(value)


def _string(value) -> str:
    if not isinstance(value, str) or not value:
        raise TypeError
    return value


def choice(values) -> tuple[str, Callable]:
    """A trait check for a word from ``values``: a wrong one is ``one_of``'s error (with its
    "did you mean"), anything but a string the usual "expected one of ..."."""
    def check(value):
        if not isinstance(value, str):
            raise TypeError
        one_of("trait", value, values)
        return value
    return f"one of {', '.join(sorted(values))}", check


TraitChecks = Mapping[str, tuple[str, Callable]]  # attribute -> (what it must be, for the
# error; a function returning the value normalised, raising TypeError when it is not that)

# what any kind of implementation (a backend, a decoder) declares alike: its worker process
# and the packages whose versions a run records
SHARED_CHECKS: TraitChecks = MappingProxyType({
    "isolated": ("True or False", _flag),
    "packages": ("a tuple of import names", _strings),
    "timeout_s": ("a positive finite number of seconds", _seconds),
    "startup_timeout_s": ("a positive finite number of seconds", _seconds),
    "prepare": ("None or a method taking no arguments", _callable_or_none),
})

_CHECKS: TraitChecks = {
    **SHARED_CHECKS,
    "dtypes": (f"None or a non-empty tuple of names from {', '.join(FLOAT_DTYPES)}", _dtypes),
    "device": ("a device name such as 'cpu' or 'cuda'", _string),
    "known_issues": ("a mapping of 'case/dtype' glob to a reason (str -> str)", _issues),
    "nondeterministic": ("None or a non-negative finite number (how far two calls may differ)",
                         _tolerance_or_none),
    "compile_ahead": ("None or a method taking no arguments (returning a note or None)",
                      _callable_or_none),
}


def read_traits(cls, impl, checks: TraitChecks, **derived):
    """The traits dataclass ``cls`` as ``impl`` (an implementation object, or its class)
    declares it: each field ``impl`` has as an attribute, checked and normalised by
    ``checks`` (a field without a check is taken as it is); ``derived``, what the caller read
    off ``impl`` (a signature, a method), never declared; the defaults for the rest. A declared
    value of the wrong kind is an InputError (a ValueError) "CLASS.ATTR: expected X, got Y"."""
    owner = impl.__name__ if isinstance(impl, type) else type(impl).__name__
    values = dict(derived)
    for f in fields(cls):
        if f.name in derived or not hasattr(impl, f.name):
            continue
        value = getattr(impl, f.name)
        if f.name not in checks:
            values[f.name] = value
            continue
        expected, check = checks[f.name]
        try:
            values[f.name] = check(value)
        except TypeError:
            raise InputError(f"{owner}.{f.name}", f"expected {expected}, got {value!r}") from None
        except InputError as exc:  # a check's own message (one_of's), named for the trait: a
            # declaration to fix, never a name looked up, so no KeyError
            raise InputError(f"{owner}.{f.name}", exc.problem) from None
    return cls(**values)


@dataclass(frozen=True)
class BackendTraits:
    """Everything optional a backend may declare, with its default; read by :meth:`of`.

    A backend declares a trait as a class (or instance) attribute of the same name; one it
    leaves out takes the default below. ``takes_grad_weights`` and ``takes_exact_shape`` are
    not declared but read off ``run``'s signature.
    """

    # run in a worker process (ctcbench.runtime.worker): set by the third-party frameworks, whose
    # imports clash or whose kernels can crash the process
    isolated: bool = False
    # logits dtypes the backend computes in; drivers record the others as "unsupported"
    # without calling run. None: any, the backend refuses with UnsupportedProblem itself
    dtypes: tuple[str, ...] | None = None
    # where it computes, the "device" column of every row
    device: str = "cpu"
    # for plugins, their upstream bugs: {"case-glob/dtype-glob": why}; compare records a failure
    # there as "known" (the built-in backends' are data, in cases/known_issues.toml)
    known_issues: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    # import names whose distribution versions a run records, beyond the backend's own module
    packages: tuple[str, ...] = ()
    # isolated only: seconds a worker may take per problem before it is killed
    timeout_s: float = DEFAULT_TIMEOUT_S
    # isolated only: seconds a worker may take to start (spawn, framework import, prepare())
    startup_timeout_s: float = DEFAULT_STARTUP_TIMEOUT_S
    # called once in a new worker process before the first problem (e.g. import the
    # framework); None: nothing to do
    prepare: Callable[[], None] | None = None
    # None: two calls on one problem give the same bits, and fuzz (every problem) and compare
    # (cases with expect.deterministic) check it. A number: the backend declares itself
    # nondeterministic (atomics, a reduction order that changes) and two calls may differ by up
    # to this much, absolute, in each loss and gradient entry
    nondeterministic: float | None = None
    # compare calls it once, in this process and only for a backend that runs here (not
    # isolated), before the backend's rows: it compiles what the first run would (numba's
    # kernel, into its disk cache) in a child process, so the compile holds no lock of this
    # process, and returns a note saying what it did, or None when there was nothing to do.
    # None: nothing to compile ahead
    compile_ahead: Callable[[], str | None] | None = None
    # the adapter hands its framework logit 0 on padded frames (CTCProblem.clean_logits), not
    # what the case holds there, so NaN or inf padding never reaches the framework; compare
    # notes it on the rows of cases that put values there. False: padded frames reach it as
    # they are
    clears_padded_frames: bool = False
    # run() accepts grad_weights (see Backend); read off its signature, never declared
    takes_grad_weights: bool = False
    # the backend has its own reduction, ``run_reduced(problem, *, reduction, zero_infinity)``
    # returning ``.loss`` (a scalar, or (N,) for "none") and ``.grad_logits`` (T, N, C), the
    # gradient of that loss (of its sum for "none"); compare checks it against
    # ctcbench.reduce_loss. Read off the backend (a method of that name), never declared
    runs_reduced: bool = False
    # run() accepts exact_shape=True: compute on the problem's own shape, with no padding to
    # shared compilation buckets (what `bench` asks for); read off its signature
    takes_exact_shape: bool = False
    # the backend has ``kernel(problem)``: it converts the problem into the framework's own
    # objects once (tensors, sparse labels, a function compiled for the exact shape) and
    # returns a zero-argument function that computes the loss and the gradient from them and
    # waits for the result, as a user's own training step would. `bench` times that function
    # as the kernel time; the adapter's conversions in and out of ``run`` are timed apart.
    # Read off the backend (a method of that name), never declared
    has_kernel: bool = False
    # the backend has ``raw_ctc(logits, targets, input_lengths, target_lengths, *, blank)``:
    # the framework's own CTC loss called on NumPy arrays exactly as given, with no CTCProblem
    # (which would refuse malformed input first) and no checks or clamping of the adapter's
    # own: logits (T, N, C) float32 unnormalised scores (NaN/inf allowed, T or N may be 0),
    # targets (N, S) int64 padded, input_lengths and target_lengths (N,) int64, any values
    # (negative, > T, > S, labels >= C or == blank). It applies the log_softmax the adapter
    # normally applies, asks for per-sample losses (no reduction) and returns
    # ``(loss, grad_logits)`` as NumPy arrays of whatever shape the framework gave
    # (``grad_logits`` None where no gradient comes cheaply); it raises whatever the framework
    # raises, and UnsupportedProblem with a reason where the framework's API cannot express
    # the input at all (optax takes padding masks, so no negative length). What it is for:
    # robustness probes, run through the worker (``call_raw``), where a crash costs only the
    # worker. Read off the backend (a method of that name), never declared
    has_raw_ctc: bool = False

    @classmethod
    def of(cls, backend) -> "BackendTraits":
        """The traits ``backend`` declares, defaults for the rest; a declared value of the
        wrong kind is a ValueError "CLASS.ATTR: expected X, got Y"."""
        return read_traits(cls, backend, _CHECKS,
                           takes_grad_weights=run_takes(backend, "grad_weights"),
                           runs_reduced=callable(getattr(backend, "run_reduced", None)),
                           takes_exact_shape=run_takes(backend, "exact_shape"),
                           has_kernel=callable(getattr(backend, "kernel", None)),
                           has_raw_ctc=callable(getattr(backend, "raw_ctc", None)))


# -- checking what crosses the contract -------------------------------------------------------
def as_result(raw, problem) -> BackendResult:
    """Check a backend's raw return value against the contract and normalise it."""
    T, N, C, _ = problem.shape
    for attr in ("loss", "grad_logits"):
        if not hasattr(raw, attr):
            raise TypeError(f"backend result: expected an object with .loss and .grad_logits, "
                            f"got {type(raw).__name__} without .{attr}")
    loss = np.asarray(to_numpy(raw.loss, "backend result loss")[0], dtype=np.float64).reshape(-1)
    grad = np.asarray(to_numpy(raw.grad_logits, "backend result grad_logits")[0], dtype=np.float64)
    if loss.shape != (N,):
        raise ValueError(f"backend result loss: expected shape ({N},), got {loss.shape}")
    if grad.shape != (T, N, C):
        raise ValueError(f"backend result grad_logits: expected shape {(T, N, C)}, got {grad.shape}")
    # optional result fields, as BackendResult documents them
    compute_dtype = raw.compute_dtype if hasattr(raw, "compute_dtype") else None
    notes = list(raw.notes or []) if hasattr(raw, "notes") else []
    return BackendResult(loss, grad, compute_dtype, notes, raw=raw)


def grad_weights_array(grad_weights, n: int) -> np.ndarray:
    """``grad_weights`` as the contract wants it: ``(N,)`` float64, one upstream gradient per
    loss; anything else is a ValueError saying what was expected."""
    expected = (f"grad_weights: expected shape ({n},) real numbers (one upstream gradient "
                "per sample)")
    try:
        w, _ = to_numpy(grad_weights, "grad_weights")
    except ValueError:  # ragged lists and the like
        raise ValueError(f"{expected}, got {type(grad_weights).__name__} that is not an array") \
            from None
    if w.shape != (n,) or w.dtype.kind not in "iuf":
        raise ValueError(f"{expected}, got shape {w.shape} of {w.dtype.name}")
    w = w.astype(np.float64)
    if not np.isfinite(w).all():  # NaN or inf would poison every gradient it scales
        raise ValueError(f"{expected.replace('real', 'finite real')}, got {w.tolist()}")
    return w


# -- the framework's own call on unchecked input -------------------------------------------------
@dataclass
class RawOutcome:
    """What a backend's ``raw_ctc`` did on one input (:func:`call_raw`).

    ``outcome`` is ``"returned"`` (``loss`` float64, ``grad_logits`` float64 or None, in the
    shapes the framework gave) or ``"raised"`` (``error_type``, the exception's class name,
    qualified with its module unless a builtin, and ``message``, its text cut at 2000
    characters). A crash or a hang is not an outcome here: through the worker they raise
    BackendCrashed and BackendTimeout, and an UnsupportedProblem (the API cannot express the
    input) is raised as itself.
    """

    outcome: str  # "returned" | "raised"
    loss: np.ndarray | None = None
    grad_logits: np.ndarray | None = None
    error_type: str | None = None
    message: str | None = None


def exception_name(exc: BaseException) -> str:
    """``exc``'s class name, with its module unless it is a builtin
    (``"ValueError"``, ``"torch.OutOfMemoryError"``)."""
    cls = type(exc)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"


def call_raw(backend, logits, targets, input_lengths, target_lengths, *, blank: int,
             name: str | None = None) -> RawOutcome:
    """Call ``backend.raw_ctc`` on the arrays as given and classify what it did: a return
    value is ``"returned"``, an exception ``"raised"``; ``UnsupportedProblem`` is raised as
    itself, and so it is, naming the backend (``name``, default its ``name`` attribute or
    class), when the backend has no ``raw_ctc``. Used in-process and inside the worker alike,
    so both classify the same way. A return value that is not a ``(loss, grad_logits)`` pair
    is the adapter's bug, a TypeError, not an outcome."""
    name = name or getattr(backend, "name", None) or type(backend).__name__
    hook = getattr(backend, "raw_ctc", None)
    if not callable(hook):
        raise UnsupportedProblem(f"{name} has no raw_ctc hook")
    try:
        returned = hook(logits, targets, input_lengths, target_lengths, blank=blank)
    except UnsupportedProblem:
        raise
    except Exception as exc:
        return RawOutcome("raised", error_type=exception_name(exc), message=str(exc)[:2000])
    if not isinstance(returned, tuple) or len(returned) != 2:
        raise TypeError(f"{name}.raw_ctc: expected a (loss, grad_logits) pair, got "
                        f"{type(returned).__name__}")
    loss, grad = returned
    return RawOutcome("returned", loss=np.asarray(loss, dtype=np.float64),
                      grad_logits=None if grad is None else np.asarray(grad, dtype=np.float64))
