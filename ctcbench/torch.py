"""Train with any registry backend: :func:`ctc_loss` and :class:`CTCLoss`, with the arguments,
shapes and reductions of ``torch.nn.functional.ctc_loss``.

Shape letters as in :mod:`ctcbench.core.problem`: ``T`` frames, ``N`` batch, ``C`` classes
incl. blank, ``S`` padded target width. ``import ctcbench`` does not import torch; this module
does (``import ctcbench.torch``). Its own ``import torch`` is absolute, so it is the real torch.

The function computed is ``f(x) = sum_n w_n * CTC_n(log_softmax(x))``, ``w`` the reduction's
per-sample weights, and the gradient handed back for ``x`` is the backend's logits gradient
``w * (softmax(x) - gamma)``. On log-probs that is torch's loss and torch's gradient
(``exp(log_probs) - gamma``, not the "true" ``-gamma``: torch's trap, pytorch/pytorch issues
52241, 82545, 127608); through a ``log_softmax`` upstream it equals the ``-gamma`` gradient; and,
unlike torch's, it is the exact derivative of the value returned, so ``gradcheck`` passes on
log-probs directly. Worked through in docs/torch-loss.md.

Each backend runs once per step, in ``forward``, with the weights as ``grad_weights`` when its
``run`` takes them (``BackendTraits.takes_grad_weights``; else the unit-weight gradient is
scaled here); ``backward`` multiplies by the upstream gradient (unless it is the 1 of
``loss.backward()``), which is exact because the contract's gradient is linear in the weights.
"""
from __future__ import annotations

import numpy as np
import torch
from torch.autograd.function import once_differentiable

from ctcbench.core.problem import CTCProblem
from ctcbench.core.reduction import REDUCTIONS, reduce_loss, reduction_weights
from ctcbench.runtime.protocol import BackendTraits, BackendUnavailable
from ctcbench.runtime.registry import REFERENCE, LoadedBackend, backend_names, get_backend

# The default backend on the CPU: the compiled one when it is registered and can run here,
# else the float64 NumPy reference (exact, slower). Pass backend= to choose another.
PREFERRED_BACKEND = "numba"
FALLBACK_BACKEND = REFERENCE


_default: list = [None, None]  # [registry state, the default LoadedBackend resolved in it]


def _default_key() -> tuple:
    """What the default backend depends on: the preferred and fallback names and the
    backends registered or unregistered in this process (entry points are read once)."""
    from ctcbench.runtime.registry import LOSSES
    return PREFERRED_BACKEND, FALLBACK_BACKEND, LOSSES.revision


def _resolve_default() -> LoadedBackend:
    if PREFERRED_BACKEND in backend_names():
        try:
            return get_backend(PREFERRED_BACKEND)
        except BackendUnavailable:
            pass
    return get_backend(FALLBACK_BACKEND)


def resolve_backend(backend=None) -> LoadedBackend:
    """A :class:`~ctcbench.runtime.registry.LoadedBackend` for ``backend``: a registry name, one already
    loaded (kept, so an isolated backend's worker process is reused), or ``None`` for the
    default (``"numba"`` when registered and available here, else ``"numpy"``)."""
    if isinstance(backend, LoadedBackend):
        return backend
    if backend is None:
        key = _default_key()
        if _default[0] != key:  # resolved once per registry state: listing the registry reads
            _default[:] = [key, _resolve_default()]  # the entry points, ~5 ms a call
        return _default[1]
    if isinstance(backend, str):
        return get_backend(backend)  # KeyError listing the known names; BackendUnavailable
    raise TypeError(f"backend: expected a registry name, a LoadedBackend or None, "
                    f"got {type(backend).__name__}")


def _index_array(x, name: str) -> np.ndarray:
    """An integer tensor, array, sequence or int as a NumPy array (dtype kept)."""
    if isinstance(x, torch.Tensor):
        return x.detach().cpu().numpy()
    arr = np.asarray(x)
    if arr.dtype.kind not in "iu":
        raise ValueError(f"{name}: expected integers (a tensor, a sequence or an int), "
                         f"got {arr.dtype.name}")
    return arr


def _problem(log_probs: torch.Tensor, targets, input_lengths, target_lengths, blank: int):
    """(CTCProblem, unbatched?) from torch's argument forms: ``log_probs (T, N, C)`` with
    targets ``(N, S)`` or concatenated, or unbatched ``(T, C)`` with targets ``(S,)`` and
    scalar lengths (as in torch, ``S`` must equal the target length)."""
    if not isinstance(log_probs, torch.Tensor):
        raise TypeError(f"log_probs: expected a torch.Tensor, got {type(log_probs).__name__}")
    if log_probs.dim() not in (2, 3):
        raise ValueError(f"log_probs: expected shape (T, N, C) or unbatched (T, C), "
                         f"got {tuple(log_probs.shape)}")
    unbatched = log_probs.dim() == 2
    targets = _index_array(targets, "targets")
    input_lengths = _index_array(input_lengths, "input_lengths")
    target_lengths = _index_array(target_lengths, "target_lengths")
    x = log_probs.detach().cpu()
    if unbatched:
        if targets.ndim != 1:
            raise ValueError(f"targets: expected shape (S,) for unbatched log_probs (T, C), "
                             f"got {targets.shape}")
        for name, arr in (("input_lengths", input_lengths), ("target_lengths", target_lengths)):
            if arr.size != 1:
                raise ValueError(f"{name}: expected one length for unbatched log_probs (T, C), "
                                 f"got shape {arr.shape}")
        x = x.unsqueeze(1)  # (T, 1, C); targets (S,) stay 1-D: concatenated, one sample
        input_lengths, target_lengths = input_lengths.reshape(1), target_lengths.reshape(1)
    # no copy of the logits: the backend runs in this call, before anything can change them
    return (CTCProblem(x, targets, input_lengths, target_lengths, blank=blank, copy=False),
            unbatched)


def _run(backend: LoadedBackend, problem: CTCProblem, w: np.ndarray, dtype: torch.dtype):
    """``(loss (N,), gradient (T, N, C) weighted by w (N,), compute dtype)`` of one run.
    numba in this process is called as itself, for a gradient its kernel stores in float32
    for any tensor below float64 (the float64 result rounded once; no float64 array in
    between, and no contract copy: the cast alone was 0.5 ms of an 11 ms step,
    docs/torch-loss.md); it writes a fresh array each call, which torch then holds without a
    copy."""
    from ctcbench.backends.numba.backend import NumbaBackend
    if isinstance(backend.impl, NumbaBackend) and not backend.isolated:
        raw = backend.impl.run(problem, grad_weights=w,
                               grad_dtype=None if dtype == torch.float64 else "float32")
        return raw.loss, raw.grad_logits, raw.compute_dtype
    if backend.traits.takes_grad_weights:
        result = backend.run(problem, grad_weights=w)
        return result.loss, result.grad_logits, result.compute_dtype  # already weighted
    result = backend.run(problem)
    return result.loss, result.grad_logits * w[None, :, None], result.compute_dtype


class BackendCTCFunction(torch.autograd.Function):
    """``f(x) = reduce(CTC(log_softmax(x)))`` by a registry backend; see the module docstring
    for why the gradient handed back for ``x`` is the backend's logits gradient."""

    @staticmethod
    def forward(ctx, x, problem, backend, reduction, zero_infinity, said=None):
        N = problem.shape[1]
        w = reduction_weights(problem.target_lengths, reduction)  # (N,)
        with torch.enable_grad():  # forward runs without grad; torch-based backends need it
            losses, grad, compute_dtype = _run(backend, problem, w, x.dtype)  # (N,), (T, N, C)
        if said is not None:
            said.append(compute_dtype)  # what the backend says it computed in
        loss = reduce_loss(losses, problem.target_lengths, reduction,
                           zero_infinity=zero_infinity)  # (N,) for "none", else a float
        infinite = np.isinf(losses)  # (N,) infeasible targets
        if infinite.any() and not zero_infinity:
            # An infinite loss has no gradient; torch puts NaN on its valid frames, so does this.
            grad = grad.copy()
            grad[problem.frame_mask & infinite[None, :]] = np.nan
        ctx.save_for_backward(torch.from_numpy(grad).to(x.device, x.dtype))
        ctx.per_sample = reduction == "none"
        out = torch.as_tensor(np.asarray(loss, dtype=np.float64), dtype=x.dtype, device=x.device)
        return out.reshape(N) if ctx.per_sample else out.reshape(())

    @staticmethod
    @once_differentiable  # the saved gradient is a constant: no second derivative, say so
    def backward(ctx, grad_output):
        (grad,) = ctx.saved_tensors  # (T, N, C)
        if not ctx.per_sample and grad_output.device.type == "cpu" and float(grad_output) == 1:
            return grad, None, None, None, None, None  # loss.backward(): no pass over grad
        scale = grad_output[None, :, None] if ctx.per_sample else grad_output  # (1, N, 1) or ()
        return grad * scale, None, None, None, None, None


def ctc_loss(log_probs, targets, input_lengths, target_lengths, blank: int = 0,
             reduction: str = "mean", zero_infinity: bool = False, *, backend=None,
             compute_dtype: str | None = None):
    """CTC loss by a registry backend, differentiable, as ``torch.nn.functional.ctc_loss``.

    Args:
      log_probs: ``(T, N, C)`` or unbatched ``(T, C)`` float tensor, time-major: log-probs
        (``log_softmax`` output) or raw logits; the loss is that of ``log_softmax(log_probs)``,
        which is the same for log-probs (see the module docstring for the gradient). Frames past
        ``input_lengths`` are ignored (they may hold NaN) and get a zero gradient; valid frames
        must be finite.
      targets: padded ``(N, S)``, concatenated ``(sum(target_lengths),)``, or ``(S,)`` with
        ``S == target_lengths`` when unbatched; integers in ``[0, C)``, none equal to
        ``blank`` within its length.
      input_lengths: ``(N,)`` tensor or sequence, each ``<= T``; a scalar when unbatched.
      target_lengths: ``(N,)`` tensor or sequence; a scalar when unbatched.
      blank: index of the blank class in ``[0, C)``.
      reduction: ``"none"`` (per-sample losses ``(N,)``, a scalar when unbatched), ``"sum"``, or
        ``"mean"`` (each loss divided by its target length clamped to 1, then averaged).
      zero_infinity: an infeasible target (input too short) gives loss 0 and gradient 0; without
        it the loss is ``inf`` and its gradient NaN on that sample's valid frames, as in torch.
      backend: a registry name (``"numpy"``, ``"torch"``, ``"optax"``, a plugin), a
        :class:`~ctcbench.runtime.registry.LoadedBackend` (reused: pass one for an isolated backend so
        its worker process lives across calls), or ``None``: ``"numba"`` when it is registered
        and available here, else ``"numpy"`` (the exact float64 reference).

      compute_dtype: ``None`` (the backend's default: float64 for ``numba`` and ``numpy``), or
        for backend ``numba`` (the default) ``"float64"`` or, opt-in, ``"float32"``: its float32
        compute (within the case library's float32 tolerance; samples it cannot certify in
        float32 are computed in float64). Never chosen unless asked.

    Returns:
      The loss in ``log_probs``' dtype and device (the backend computes in the dtype it
      supports for it, e.g. float64 for ``numpy``, and the result is cast back). Its
      ``compute_dtype`` attribute says what the backend computed in (``"float32"``,
      ``"float64"``, numba's ``"float32 (k of N samples in float64)"``, or ``None`` where the
      backend does not say).
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction: expected one of {', '.join(REDUCTIONS)}, got {reduction!r}")
    if not isinstance(zero_infinity, bool):
        raise ValueError(f"zero_infinity: expected True or False, got {zero_infinity!r}")
    loaded = _with_compute_dtype(resolve_backend(backend), compute_dtype)
    problem, unbatched = _problem(log_probs, targets, input_lengths, target_lengths, blank)
    x = log_probs.unsqueeze(1) if unbatched else log_probs  # (T, N, C)
    said = []
    loss = BackendCTCFunction.apply(x, problem, loaded, reduction, zero_infinity, said)
    loss = loss.reshape(()) if unbatched else loss
    loss.compute_dtype = said[0] if said else None
    return loss


_numba_by_dtype: dict = {}  # compute dtype -> LoadedBackend of numba computing in it


def _with_compute_dtype(loaded: LoadedBackend, compute_dtype) -> LoadedBackend:
    """``loaded``, or for ``compute_dtype`` a numba backend computing in that dtype (made
    once per dtype); a ValueError for another backend or dtype."""
    if compute_dtype is None:
        return loaded
    from ctcbench.backends.numba.backend import COMPUTE_DTYPES, NumbaBackend
    if compute_dtype not in COMPUTE_DTYPES:
        raise ValueError(f"compute_dtype: expected None or one of {', '.join(COMPUTE_DTYPES)}, "
                         f"got {compute_dtype!r}")
    if loaded.name != "numba" or loaded.isolated:
        raise ValueError(f"compute_dtype: only backend 'numba' (in-process) takes it, got "
                         f"backend {loaded.name!r}")
    if compute_dtype == getattr(loaded.impl, "compute_dtype", None):
        return loaded
    if compute_dtype not in _numba_by_dtype:
        impl = NumbaBackend(compute_dtype=compute_dtype)
        # its own traits: a method trait (compile_ahead) is bound to this instance, its dtype
        _numba_by_dtype[compute_dtype] = LoadedBackend("numba", impl, BackendTraits.of(impl))
    return _numba_by_dtype[compute_dtype]


class CTCLoss(torch.nn.Module):
    """:func:`ctc_loss` as a module, like ``torch.nn.CTCLoss``; the backend is resolved once,
    here, so an isolated backend keeps its worker process between calls."""

    def __init__(self, blank: int = 0, reduction: str = "mean", zero_infinity: bool = False, *,
                 backend=None, compute_dtype: str | None = None):
        super().__init__()
        if reduction not in REDUCTIONS:
            raise ValueError(f"reduction: expected one of {', '.join(REDUCTIONS)}, "
                             f"got {reduction!r}")
        self.blank = blank
        self.reduction = reduction
        self.zero_infinity = zero_infinity
        self.backend = _with_compute_dtype(resolve_backend(backend), compute_dtype)
        self.compute_dtype = compute_dtype

    def forward(self, log_probs, targets, input_lengths, target_lengths):
        return ctc_loss(log_probs, targets, input_lengths, target_lengths, self.blank,
                        self.reduction, self.zero_infinity, backend=self.backend,
                        compute_dtype=self.compute_dtype)

    def extra_repr(self) -> str:
        return (f"blank={self.blank}, reduction={self.reduction!r}, "
                f"zero_infinity={self.zero_infinity}, backend={self.backend.name!r}")
