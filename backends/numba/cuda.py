"""Backend ``numba-cuda``: a CTC loss of ctcbench's own on a CUDA GPU, written in numba.cuda.

Why numba.cuda: numba is already a dependency (the ``numba`` CPU backend), its kernels are
plain Python with explicit threads, and numba ships a CUDA simulator
(``NUMBA_ENABLE_CUDASIM=1``) that runs the very same kernels on the CPU, one Python thread per
CUDA thread, so the tests check this code without a GPU (slowly: small problems only).

The design (kernels in ``backends/numba/cuda_kernels.py``, described there in full):

1. ``log_softmax`` on the GPU, one thread per ``(t, n)``;
2. the forward and backward recursions in log space, one thread block per sample, the
   block's threads striding over the ``S = 2L + 1`` extended states with one
   ``cuda.syncthreads()`` per frame; ``alpha`` and ``beta`` are ``(T, N, S)`` device arrays;
3. the gradient w.r.t. the logits, ``softmax - gamma`` (``gamma`` the class posterior), one
   thread per ``(t, n)`` looping over the classes and states serially.

Everything is computed in the problem's dtype (float32 or float64), but for one sum per
sample in float64 (the frames' largest log-probabilities, which the recursions leave out so
their values stay small and float32 keeps its precision on long inputs); no float atomics and a
fixed order of every sum make two calls bit-identical. Log space makes ``-inf`` exact: a
``-inf`` logit is probability 0 (gradient 0 there), an infeasible target gives loss ``+inf``
and a zero gradient, padded frames get 0. The blank may be any class.

It runs in a worker process (``isolated``): a CUDA error (an illegal address) poisons the
CUDA context of the process it happens in, and ``NUMBA_ENABLE_CUDASIM`` is read when numba
is imported, so a fresh process is where the simulator can be switched on.
"""
from __future__ import annotations

import math
import os

import numpy as np

from ctcbench.core.problem import CTCProblem
from ctcbench.runtime.protocol import BackendUnavailable, UnsupportedProblem, grad_weights_array

SIM_ENV = "NUMBA_ENABLE_CUDASIM"
MAX_THREADS = 256  # threads per block of the recursion (states per sample are strided over)
GRID_THREADS = 128  # threads per block of the per-(t, n) kernels
# In the simulator every CUDA thread is a Python thread: 32 per block (one warp) does the same
# work about twice as fast as 128-256, and the states are still strided over
SIM_THREADS = 32


def simulator_requested() -> bool:
    """Whether numba's CUDA simulator is asked for (``NUMBA_ENABLE_CUDASIM=1``)."""
    return os.environ.get(SIM_ENV, "0").strip() not in ("", "0")


def _simulating(cuda) -> bool:
    """Whether this process's numba.cuda is the simulator."""
    return "simulator" in getattr(cuda.jit, "__module__", "")


def _import_cuda():
    try:
        from numba import cuda
    except ImportError as exc:
        raise BackendUnavailable(f"numba.cuda cannot be imported ({exc})",
                                 "pip install numba numba-cuda") from None
    return cuda


def block_threads(S: int, most: int = MAX_THREADS) -> int:
    """Threads per block of the recursion: the states rounded up to a warp, at most ``most``."""
    return min(most, 32 * max(1, math.ceil(S / 32)))


class NumbaCudaBackend:
    """CTC forward-backward on a CUDA GPU in numba.cuda; computes in the problem's dtype."""

    name = "numba-cuda"
    device = "cuda"
    dtypes = ("float32", "float64")
    isolated = True
    packages = ("numba", "numba_cuda")

    def __init__(self):
        if simulator_requested():  # the worker imports numba with the simulator on
            self.simulator = True
            return
        cuda = _import_cuda()
        if not cuda.is_available():
            raise BackendUnavailable(
                "no CUDA device is visible to numba",
                "needs a CUDA GPU and numba-cuda (pip install numba-cuda); "
                f"{SIM_ENV}=1 runs it, slowly, in numba's CUDA simulator")
        self.simulator = False

    def _cuda(self):
        cuda = _import_cuda()
        if simulator_requested() and not _simulating(cuda):
            raise BackendUnavailable(
                f"{SIM_ENV}=1 was set after numba.cuda was imported in this process",
                "run the backend isolated (its default), or set it before starting Python")
        try:  # a small batch launches few blocks by design: no warning on every call
            from numba import config
            config.CUDA_LOW_OCCUPANCY_WARNINGS = 0
        except (ImportError, AttributeError):
            pass
        from ctcbench.backends.numba import cuda_kernels as numba_cuda_kernels
        return cuda, numba_cuda_kernels

    def _check(self, problem: CTCProblem) -> None:
        if problem.dtype not in self.dtypes:
            raise UnsupportedProblem(f"{self.name} computes in {'/'.join(self.dtypes)}, "
                                     f"not {problem.dtype}")

    def _prepare(self, problem: CTCProblem, grad_weights):
        """Copy the problem to the GPU once and allocate the outputs; returns ``(launch,
        fetch)``: ``launch()`` runs the three kernels, ``fetch()`` copies loss and gradient
        back (float64 NumPy)."""
        cuda, kernels = self._cuda()
        T, N, C, L = problem.shape
        S = 2 * L + 1
        dtype = np.dtype(problem.dtype)
        need = dtype.itemsize * (2 * T * N * S + 3 * T * N * C) + 8 * N * (L + 3)  # bytes
        if not self.simulator:
            free, _ = cuda.current_context().get_memory_info()
            if need > free:
                raise UnsupportedProblem(
                    f"{self.name}: needs {need / 2**30:.1f} GiB of GPU memory (alpha and beta "
                    f"(T, N, S) = ({T}, {N}, {S}), logits, log-probs and gradient (T, N, C)), "
                    f"{free / 2**30:.1f} GiB free")
        weights = (np.ones(N, dtype) if grad_weights is None
                   else grad_weights_array(grad_weights, N).astype(dtype))
        d_logits = cuda.to_device(np.ascontiguousarray(problem.logits, dtype=dtype))  # (T, N, C)
        targets = np.full((N, max(L, 1)), problem.blank, dtype=np.int64)  # (N, L), never 0 wide
        targets[:, :L] = problem.targets
        d_targets = cuda.to_device(targets)
        d_in = cuda.to_device(np.ascontiguousarray(problem.input_lengths, dtype=np.int64))
        d_tl = cuda.to_device(np.ascontiguousarray(problem.target_lengths, dtype=np.int64))
        d_w = cuda.to_device(weights)
        d_lp = cuda.device_array((T, N, C), dtype)
        d_top = cuda.device_array((T, N), dtype)
        d_alpha = cuda.device_array((T, N, S), dtype)
        d_beta = cuda.device_array((T, N, S), dtype)
        d_loss = cuda.device_array(N, dtype)
        d_grad = cuda.device_array((T, N, C), dtype)
        blank = int(problem.blank)
        cells = T * N
        per_block = SIM_THREADS if self.simulator else GRID_THREADS
        grid = (cells + per_block - 1) // per_block
        threads = block_threads(int(2 * problem.target_lengths.max(initial=0) + 1),
                                SIM_THREADS if self.simulator else MAX_THREADS)

        def launch():
            kernels.log_softmax[grid, per_block](d_logits, d_in, d_lp, d_top)
            kernels.alpha_beta[N, threads](d_lp, d_top, d_targets, d_in, d_tl, blank, d_alpha,
                                           d_beta, d_loss)
            kernels.gradient[grid, per_block](d_lp, d_targets, d_in, d_tl, blank, d_alpha,
                                                 d_beta, d_loss, d_w, d_grad)
            cuda.synchronize()

        def fetch():
            return (d_loss.copy_to_host().astype(np.float64),
                    d_grad.copy_to_host().astype(np.float64))

        return launch, fetch

    def run(self, problem: CTCProblem, *, grad_weights=None) -> "NumbaCudaResult":
        """``grad_weights (N,)``: upstream gradient per loss (default 1), scales the gradient."""
        self._check(problem)
        T, N, C, _ = problem.shape
        if grad_weights is not None:
            grad_weights = grad_weights_array(grad_weights, N)
        if T == 0:  # nothing to launch: with no frames only an empty target has a path
            return NumbaCudaResult(np.where(problem.target_lengths == 0, 0.0, np.inf),
                                   np.zeros((0, N, C)), problem.dtype,
                                   ["T = 0: loss known without the kernel"])
        launch, fetch = self._prepare(problem, grad_weights)
        launch()
        loss, grad = fetch()
        notes = ["numba.cuda simulator (CPU)"] if self.simulator else []
        return NumbaCudaResult(loss, grad, problem.dtype, notes)

    def kernel(self, problem: CTCProblem):
        """What ``bench`` times: the problem is on the GPU already; the function runs the three
        kernels and waits for them (``cuda.synchronize``), results left on the device."""
        self._check(problem)
        if problem.shape[0] == 0:
            return lambda: None
        launch, _ = self._prepare(problem, None)
        return launch


class NumbaCudaResult:
    """``loss (N,)``, ``grad_logits (T, N, C)`` float64 copies of what the GPU computed."""

    def __init__(self, loss, grad_logits, compute_dtype, notes):
        self.loss = loss
        self.grad_logits = grad_logits
        self.compute_dtype = compute_dtype
        self.notes = notes
