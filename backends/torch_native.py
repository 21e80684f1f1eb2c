"""Backends ``torch``, ``torch-cuda`` and ``torch-cudnn``: ``torch.nn.functional.ctc_loss``.

The adapter applies log_softmax itself and hands the kernel the log-probs as a leaf tensor,
so the kernel's own gradient w.r.t. log-probs is seen before the chain rule through
log_softmax is applied (on valid frames; whatever the kernel puts on padded frames is kept
and compared).

Trap (pytorch/pytorch issues 52241, 82545, 127608, 181534): for ``log_probs`` torch returns
``exp(log_probs) - gamma`` on valid frames, not the true gradient ``-gamma``. It is the
gradient w.r.t. the logits *assuming* log_probs = log_softmax(logits). Through log_softmax
both give the same gradient w.r.t. the logits, because ``g - softmax * sum_c(g)`` is
``p - gamma`` for either (the extra ``p`` sums to 1 over classes). So ctcbench compares
gradients w.r.t. logits. Feed torch un-normalised scores, though, and the printed loss is
wrong and the gradient torch returns is not the gradient of that loss.
"""
from __future__ import annotations

import contextlib
import os
import sys

import numpy as np

from ctcbench.core.problem import CTCProblem
from ctcbench.runtime.protocol import (
    BackendResult,
    BackendUnavailable,
    UnsupportedProblem,
    grad_weights_array,
)

INSTALL_HINT = "pip install torch"
# the aten ops that compute CTC in torch: cuDNN's, and the native CPU/CUDA kernel
PATH_OPS = ("aten::_cudnn_ctc_loss", "aten::_ctc_loss")


@contextlib.contextmanager
def _quiet_stderr():
    """File descriptor 2 to /dev/null: torch 2.13's profiler prints "USDT ... profiler_start"
    and "... profiler_stop" there as it starts and stops, which says nothing to a user."""
    sys.stderr.flush()
    saved = os.dup(2)
    try:
        with open(os.devnull, "w") as null:
            os.dup2(null.fileno(), 2)
        yield
    finally:
        os.dup2(saved, 2)
        os.close(saved)


def _import_torch():
    try:
        import torch
    except ImportError:
        raise BackendUnavailable("torch is not installed", INSTALL_HINT) from None
    return torch


class TorchBackend:
    """torch's native kernel on the CPU; computes in the problem's dtype."""

    name = "torch"
    device = "cpu"
    dtypes = ("float32", "float64")  # ctc_loss_cpu is not implemented for Half/BFloat16

    def __init__(self):
        self.torch = _import_torch()

    def _inputs(self, problem: CTCProblem):
        """(targets, input_lengths, target_lengths) in the form this path needs: the caller's
        layout (padded or concatenated) and index dtype (int32 or int64), as given."""
        torch = self.torch
        targets = (problem.concatenated_targets() if problem.target_layout == "concatenated"
                   else problem.targets)
        return tuple(torch.from_numpy(x.astype(problem.index_dtype)).to(self.device)
                     for x in (targets, problem.input_lengths, problem.target_lengths))

    def _check(self, problem: CTCProblem) -> None:
        if problem.dtype not in self.dtypes:
            raise UnsupportedProblem(f"{self.name} computes in {'/'.join(self.dtypes)}, "
                                     f"not {problem.dtype}")
        if np.isneginf(problem.logits[problem.frame_mask]).any():
            # measured on torch 2.13 (CPU): the loss is right, the gradient NaN at those entries
            raise UnsupportedProblem(f"{self.name} cannot take a logit of -inf (probability 0) "
                                     f"in a valid frame: torch's ctc_loss returns NaN gradients "
                                     f"there")

    def _ctc(self, log_probs, inputs, blank: int, zero_infinity: bool):
        return self.torch.nn.functional.ctc_loss(log_probs, *inputs, blank=blank,
                                                 reduction="none", zero_infinity=zero_infinity)

    def _verify(self, loss) -> None:
        """Hook for backends that must prove which kernel ran."""

    def _traced_ctc(self, problem: CTCProblem, log_probs, inputs):
        """The loss call of ``run``, and the note saying which aten op computed it, e.g.
        ``"torch path: aten::_ctc_loss"`` (the native kernel) or ``"torch path:
        aten::_cudnn_ctc_loss"`` (cuDNN). Each call's note is read off the autograd node
        torch recorded for that very call (``loss.grad_fn``: each aten op with a derivative
        has its own node type); which op a node type belongs to is read off torch's profiler,
        its record of the op names dispatched, the first time this backend meets that node
        type. So the proof is per call, and the profiler (milliseconds, and a line or two on
        stderr in some builds) runs about once per process, not in bench's timed calls."""
        torch = self.torch
        seen = self.__dict__.setdefault("_path_notes", {})  # node type -> note
        if seen:
            loss = self._ctc(log_probs, inputs, problem.blank, zero_infinity=False)
            note = seen.get(type(loss.grad_fn).__name__)
            if note is not None:
                return loss, note
        prof = None
        for options in ({"use_kineto": False}, {}):  # the legacy one starts in milliseconds
            try:
                prof = torch.autograd.profiler.profile(**options)
                with _quiet_stderr():
                    prof.__enter__()
                break
            except Exception:  # some builds keep only Kineto's; without any, no proof
                prof = None
        try:
            loss = self._ctc(log_probs, inputs, problem.blank, zero_infinity=False)
        finally:
            if prof is not None:
                with _quiet_stderr():
                    prof.__exit__(None, None, None)
        if prof is None:
            return loss, "torch path: unknown (torch's profiler could not start)"
        names = {e.name for e in prof.function_events}
        ran = [op for op in PATH_OPS if op in names]
        note = ("torch path: " + ", ".join(ran) if ran else
                "torch path: unknown (the profiler saw "
                f"{', '.join(sorted(n for n in names if 'ctc' in n)) or 'no CTC op'})")
        seen[type(loss.grad_fn).__name__] = note
        return loss, note

    def run(self, problem: CTCProblem, *, grad_weights=None) -> BackendResult:
        """``grad_weights (N,)``: upstream gradient fed to ``backward`` (default ones)."""
        self._check(problem)
        T, N, C, _ = problem.shape
        if grad_weights is not None:
            grad_weights = grad_weights_array(grad_weights, N)
        if T == 0:  # torch rejects empty log_probs; with no frames only an empty target has a path
            return BackendResult(np.where(problem.target_lengths == 0, 0.0, np.inf),
                                 np.zeros((0, N, C)), compute_dtype=problem.dtype,
                                 notes=["T = 0: loss known without the kernel"])
        torch = self.torch
        dtype = getattr(torch, problem.dtype)
        # a copy: the problem's arrays are read-only, and torch wants writable memory
        logits = torch.from_numpy(problem.logits.copy()).to(self.device, dtype)  # (T, N, C)
        log_probs = logits.log_softmax(-1).detach().requires_grad_()  # garbage frames stay garbage
        inputs = self._inputs(problem)
        loss, path = self._traced_ctc(problem, log_probs, inputs)  # (N,), which aten op ran
        self._verify(loss)
        notes = [path]
        upstream = (torch.ones_like(loss) if grad_weights is None else
                    torch.as_tensor(grad_weights, dtype=loss.dtype, device=loss.device))  # (N,)
        finite = torch.isfinite(loss)
        if not bool(finite.all()):
            # torch puts NaN in the gradient of an infinite loss even when it is masked out;
            # its documented remedy is zero_infinity=True, so take the gradient that way.
            notes.append("gradient taken with zero_infinity=True (infinite losses present)")
            self._ctc(log_probs, inputs, problem.blank, zero_infinity=True).backward(upstream)
        else:
            loss.backward(upstream)
        grad_lp = log_probs.grad  # (T, N, C) torch's convention: exp(log_probs) - gamma
        valid = torch.from_numpy(problem.frame_mask).to(self.device)[..., None]  # (T, N, 1)
        # Chain rule through log_softmax, valid frames only: g - softmax * sum_c g.
        through = grad_lp - log_probs.detach().exp() * grad_lp.sum(-1, keepdim=True)
        grad_logits = torch.where(valid, through, grad_lp)
        return BackendResult(loss.detach().double().cpu().numpy(),
                             grad_logits.double().cpu().numpy(),
                             compute_dtype=problem.dtype, notes=notes)


    def run_reduced(self, problem: CTCProblem, *, reduction: str = "mean",
                    zero_infinity: bool = False) -> BackendResult:
        """``F.ctc_loss`` with its own ``reduction`` and ``zero_infinity``: ``loss`` a scalar
        (``(N,)`` for ``"none"``) and ``grad_logits (T, N, C)`` the gradient of that loss (of
        its sum for ``"none"``) w.r.t. the logits, through torch's own log_softmax."""
        self._check(problem)
        torch = self.torch
        logits = torch.from_numpy(problem.logits.copy()).to(self.device, getattr(torch, problem.dtype))
        logits.requires_grad_()  # (T, N, C)
        loss = torch.nn.functional.ctc_loss(logits.log_softmax(-1), *self._inputs(problem),
                                            blank=problem.blank, reduction=reduction,
                                            zero_infinity=zero_infinity)
        loss.sum().backward()
        valid = torch.from_numpy(problem.frame_mask).to(self.device)[..., None]  # (T, N, 1)
        grad = torch.where(valid, logits.grad, torch.zeros_like(logits.grad))  # padded frames: none
        return BackendResult(np.atleast_1d(loss.detach().double().cpu().numpy()),
                             grad.double().cpu().numpy(), compute_dtype=problem.dtype)

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        """``F.ctc_loss(logits.log_softmax(-1), targets, input_lengths, target_lengths,
        blank=blank, reduction="none")`` on the arrays as given (padded targets, the
        arrays' own dtypes, no checks), and the gradient of ``loss.sum()`` w.r.t. the logits;
        whatever torch raises is raised."""
        torch = self.torch
        x = torch.from_numpy(np.array(logits)).to(self.device).requires_grad_()  # (T, N, C)
        inputs = tuple(torch.from_numpy(np.array(a)).to(self.device)
                       for a in (targets, input_lengths, target_lengths))
        loss = self._ctc(x.log_softmax(-1), inputs, blank, zero_infinity=False)  # (N,)
        loss.sum().backward()
        return (loss.detach().cpu().numpy(),
                None if x.grad is None else x.grad.cpu().numpy())


class TorchCudaBackend(TorchBackend):
    """torch's native CUDA kernel (cuDNN disabled so the native kernel is what runs)."""

    name = "torch-cuda"
    device = "cuda"
    dtypes = ("float16", "float32", "float64")

    def __init__(self):
        super().__init__()
        if not self.torch.cuda.is_available():
            raise BackendUnavailable("no CUDA device is visible to torch",
                                     "needs a CUDA GPU and a CUDA build of torch")

    def _ctc(self, log_probs, inputs, blank, zero_infinity):
        with self.torch.backends.cudnn.flags(enabled=False):
            return super()._ctc(log_probs, inputs, blank, zero_infinity)


class TorchCudnnBackend(TorchCudaBackend):
    """cuDNN's CTC through torch. Only some problems can take this path; they are prepared
    so that torch selects it (float32, blank 0, int32 concatenated targets on the CPU, every
    input length == T, target lengths < 256 and <= input length), and the kernel that ran is
    checked from ``grad_fn``."""

    name = "torch-cudnn"
    dtypes = ("float32",)

    def _check(self, problem: CTCProblem) -> None:
        super()._check(problem)
        T = problem.logits.shape[0]
        why = []
        if problem.blank != 0:
            why.append(f"blank must be 0, got {problem.blank}")
        if (problem.input_lengths != T).any():
            why.append(f"every input length must equal T = {T}")
        if (problem.target_lengths >= 256).any():
            why.append(f"target lengths must be < 256, got max {problem.target_lengths.max()}")
        if (problem.target_lengths > problem.input_lengths).any():
            why.append("target lengths must be <= input lengths")
        if why:
            raise UnsupportedProblem("cuDNN path not available: " + "; ".join(why))

    def _inputs(self, problem: CTCProblem):
        torch = self.torch
        return (torch.from_numpy(problem.concatenated_targets()).to(torch.int32),  # CPU, 1-D
                problem.input_lengths.tolist(), problem.target_lengths.tolist())

    def _ctc(self, log_probs, inputs, blank, zero_infinity):
        with self.torch.backends.cudnn.flags(enabled=True):
            return TorchBackend._ctc(self, log_probs, inputs, blank, zero_infinity)

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        """As ``torch``'s, in the form cuDNN's path takes: targets concatenated (each row's
        first ``target_lengths[n]`` labels) as int32 on the CPU, lengths as lists, cuDNN
        enabled; torch may still pick its native kernel (which one ran is not checked). A
        target length that is negative or longer than the padded row cannot be written as
        concatenated targets: UnsupportedProblem."""
        targets, target_lengths = np.asarray(targets), np.asarray(target_lengths)
        bad = np.flatnonzero((target_lengths < 0) | (target_lengths > targets.shape[1]))
        if len(bad):
            raise UnsupportedProblem(
                f"{self.name}: cuDNN's path takes concatenated targets, which cannot express "
                f"a target length < 0 or > the padded width {targets.shape[1]} (samples "
                f"{bad[:5].tolist()})")
        torch = self.torch
        flat = np.concatenate([targets[n, :k] for n, k in enumerate(target_lengths)]
                              + [np.zeros(0, targets.dtype)]).astype(np.int32)
        x = torch.from_numpy(np.array(logits)).to(self.device).requires_grad_()  # (T, N, C)
        inputs = (torch.from_numpy(flat), np.asarray(input_lengths).tolist(),
                  target_lengths.tolist())
        loss = self._ctc(x.log_softmax(-1), inputs, blank, zero_infinity=False)  # (N,)
        loss.sum().backward()
        return (loss.detach().cpu().numpy(),
                None if x.grad is None else x.grad.cpu().numpy())

    def _verify(self, loss) -> None:
        kernel = type(loss.grad_fn).__name__
        if "cudnn" not in kernel.lower():
            raise RuntimeError(f"torch did not select cuDNN for this problem (grad_fn {kernel})")
