"""Backend ``numba``: an exact compiled CPU CTC, parallel over the batch.

The kernels are in :mod:`ctcbench.backends.numba.kernels` (softmax, scaled forward-backward
with a log-space fallback per sample, gradient w.r.t. the logits, all in one pass per
sample). The adapter takes logits ``(T, N, C)`` in any float dtype and computes in float64
(``compute_dtype = "float64"``): logits are widened exactly to float64 first, so one kernel
serves them all; the kernels that store a float32 gradient (``run(grad_dtype="float32")``,
``ctcbench.torch``'s, and the float32 compute's) read float32 logits as they are instead, and
widen each as they read it. ``NumbaBackend(compute_dtype="float32")`` opts in
to the float32 compute (the same kernel with a float32 gradient: float32 rows on its fast path;
samples it cannot certify in float32 are computed in float64), never the default.

Threads: ``CTCBENCH_THREADS`` (set by ``--threads``) or, unset, numba's default (one per
core); a request above the cores numba started with is capped, with a note.

Compilation: a kernel is compiled on first use, once per logits dtype it reads and gradient
dtype it stores, and cached on disk (numba ``cache=True``), so later processes only load it.
The seconds spent compiling or loading are kept in ``NumbaBackend.compile_seconds``
(``"float32/float64"``: the logits dtype the kernel reads and the compute dtype, then
``"/float32"`` for a float32 gradient -> seconds) and reported as a note on the result of the
call that paid them; the time of a run never includes them.

numba is a default dependency of ctcbench (it brings LLVM, as llvmlite); where it is missing
(installed without dependencies, a platform without its wheels) this backend raises
``BackendUnavailable`` with the install hint.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

import numpy as np

from ctcbench.backends.numba.reuse import GRADIENTS
from ctcbench.core.memory import require_memory
from ctcbench.core.problem import CTCProblem
from ctcbench.progress import said_if_slow
from ctcbench.runtime.protocol import BackendUnavailable, grad_weights_array
from ctcbench.runtime.threads import THREADS_ENV, requested

INSTALL_HINT = "pip install numba"
COMPUTE_DTYPES = ("float64", "float32")
CHUNKS_PER_THREAD = 4  # a batch's share per thread, in chunks taken as threads come free
# Waking a helper thread costs ~0.05-0.1 ms, the kernel's time for ~20,000 cells at 4 ns a
# cell: T=50 N=8 L=10 (8,400 cells) ran slower on 2 threads than on 1 (docs/numba.md).
CELLS_PER_THREAD = 50_000


def launch(kernel, args, loss, grad, path, threads: int) -> int:
    """``kernel`` (:func:`kernels.ctc_batch`) over every sample of ``args`` into
    ``loss (N,)``, ``grad (T, N, C)``, ``path (N,)``, on ``threads`` threads. The kernel
    releases the GIL; the samples, longest first (by ``T_n (2 L_n + 1)``), are dealt into
    ``CHUNKS_PER_THREAD`` chunks a thread, which the threads take one at a time, so a thread
    slowed by other load holds back at most one chunk. A batch of fewer than
    ``CELLS_PER_THREAD`` DP cells a thread runs on fewer threads, as waking one costs more
    than it saves. Returns the threads used."""
    from ctcbench.backends.numba.primitives import fp_control, restore_fp_control

    def run(samples):
        control = fp_control()  # the kernel sets the flush bits (primitives) for its call
        try:
            kernel(*args, loss, grad, path, samples)
        except BaseException:  # out of memory inside: the bits are still set, put them back
            restore_fp_control(control)
            raise

    N = loss.shape[0]
    cells = args[2] * (2 * args[3] + 1)  # (N,) DP cells per sample
    threads = max(1, min(threads, N, int(cells.sum()) // max(1, CELLS_PER_THREAD)))
    if threads == 1:
        run(np.arange(N, dtype=np.int64))
        return 1
    order = np.argsort(-cells, kind="stable")  # (N,) longest first
    count = min(N, CHUNKS_PER_THREAD * threads)
    chunks = [np.ascontiguousarray(order[j::count]) for j in range(count)]  # each (~N/count,)
    taken = iter(chunks)  # next() is atomic: each chunk is taken by one thread

    def work():
        for chunk in taken:
            run(chunk)
    pool = _helper_pool(threads - 1)
    helpers = [pool.submit(work) for _ in range(threads - 1)]
    try:
        work()
    finally:  # the helpers still write into loss and grad: wait for them, whatever happened
        for helper in helpers:
            helper.exception()
    for helper in helpers:
        helper.result()  # a helper's error, raised here
    return threads


@functools.cache
def _helper_pool(size: int) -> ThreadPoolExecutor:
    """The ``size`` threads that share a batch with the caller's (one pool per thread count,
    which ``thread_count`` caps at numba's)."""
    return ThreadPoolExecutor(max_workers=size, thread_name_prefix="numba-ctc")


def thread_count(numba_module) -> tuple[int, str | None]:
    """Threads to use: ``CTCBENCH_THREADS`` capped at numba's pool; plus a note if capped."""
    most = numba_module.config.NUMBA_NUM_THREADS
    wanted = requested()
    if wanted is None:
        return most, None
    if wanted > most:
        return most, f"{THREADS_ENV}={wanted} capped at numba's {most} threads"
    return wanted, None


def estimate_bytes(T: int, N: int, C: int, L: int, threads: int) -> int:
    """Peak bytes of a run: the ``(T, N, C)`` logits copy and gradient, and per thread the
    tables of one sample (either path; the log-space rows are 2L + 3 wide like the fast
    path's) plus one number per frame. A sample with fewer labels than the padded ``L`` may
    keep its whole table (up to ``WHOLE_TABLE_BYTES``) where ``L`` labels would be
    segmented, so the larger of the two counts."""
    from ctcbench.backends.numba import rows as k

    W = 2 * L + 3
    K = max(1, k.segment_frames.py_func(T, L))  # frames per segment at L labels (T may be 0)
    tables = max(8 * (K + -(-T // K)) * W, min(8 * T * W, k.WHOLE_TABLE_BYTES))
    return 16 * T * N * C + min(threads, N) * (tables + 8 * T)


def _cached(kernel) -> bool:
    """Whether numba's disk cache holds an index for ``kernel`` (some signature of it): a
    cache numba may not have written (a read-only folder) or a name of its changed reads as
    not cached, which costs one compile in a child process."""
    try:
        return os.path.exists(kernel._cache._cache_file._index_path)
    except AttributeError:  # a numba without this layout
        return False


def compile_ahead(compute_dtype: str = "float64") -> str | None:
    """Compile the kernel into numba's disk cache in a child process, unless it is cached
    there: the compile (~20-30 s on 2 cores) then holds no lock of this process, whose other
    threads go on at full speed, and the run that follows loads it in about a second.
    Returns what it did, as a note, or None when there was nothing to do."""
    import subprocess
    import sys

    from ctcbench.backends.numba import kernels
    if _cached(kernels.KERNELS[compute_dtype, compute_dtype]):
        return None
    start = time.perf_counter()
    child = subprocess.run(
        [sys.executable, "-c", "import sys; from ctcbench.backends.numba.backend import "
         "_compile_here; _compile_here(sys.argv[1])", compute_dtype],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if child.returncode != 0:  # the run in this process compiles, and says why it failed
        return None
    return (f"numba: compiled the {compute_dtype} kernel in {time.perf_counter() - start:.0f} s "
            f"(in a child process), once: later runs load it from numba's disk cache")


def _compile_here(compute_dtype: str) -> None:
    """``compile_ahead``'s child: one tiny run compiles the kernel into the disk cache."""
    NumbaBackend(compute_dtype).run(CTCProblem(np.zeros((2, 1, 3)), [[1]], [2], [1]))


def _kernel_input(arr, dtype) -> np.ndarray:
    """``arr`` as the kernel takes it: C-contiguous, ``dtype`` (a copy only where it is not
    already) and typed read-only, a view where the caller's array is writable. numba compiles
    one specialisation per read-only flag too: a CTCProblem's arrays are read-only, a
    converted copy is not, and each mix cost a cold compile of the whole kernel."""
    view = np.ascontiguousarray(arr, dtype=dtype).view()
    view.flags.writeable = False
    return view


class NumbaBackend:
    """Compiled forward-backward on the CPU (numba), one sample per thread; float64 unless
    ``compute_dtype="float32"`` is asked for."""

    name = "numba"

    def __init__(self, compute_dtype: str = "float64"):
        """``compute_dtype``: ``"float64"`` (the default, for every logits dtype) or, opt-in,
        ``"float32"``: the kernel's fast path on float32 rows (samples it turns down are
        computed in float64; the gradient is float32)."""
        if compute_dtype not in COMPUTE_DTYPES:
            raise ValueError(f"compute_dtype: expected one of {', '.join(COMPUTE_DTYPES)}, "
                             f"got {compute_dtype!r}")
        if importlib.util.find_spec("numba") is None:
            raise BackendUnavailable("numba is not installed", INSTALL_HINT)
        self.compute_dtype = compute_dtype
        self.compile_seconds: dict[str, float] = {}
        self._gradients = GRADIENTS  # gradients the callers have let go of (reuse.py)

    def compile_ahead(self) -> str | None:
        """:func:`compile_ahead` for this backend's compute dtype (see ``compare``)."""
        return compile_ahead(self.compute_dtype)

    def _prepare(self, problem: CTCProblem, grad_weights, grad_dtype: str):
        """What a run needs before the kernel: the thread count, the memory check, the
        kernel's input arrays, and the kernel compiled for them and a ``grad_dtype``
        gradient; returns ``(kernel, args, threads, notes)``."""
        import numba

        from ctcbench.backends.numba import kernels

        T, N, C, L = problem.shape
        threads, note = thread_count(numba)
        self._gradients.release((T, N, C), grad_dtype)  # other shapes' memory, before the check
        require_memory(T, N, C, L, need=estimate_bytes(T, N, C, L, threads))
        # Logits are widened exactly up front, to float64 for the default kernel (one
        # specialisation for compare and bench: a second cost 12 s of cold compile), to
        # float32 for the kernels storing a float32 gradient, which read float32 as it is
        # (a pass over the logits less, 0.4 ms of an 11 ms training step; docs/numba.md).
        narrow = grad_dtype == "float32" and problem.logits.dtype != np.float64
        logits_dtype = np.float32 if narrow else np.float64
        weights = (np.ones(N) if grad_weights is None
                   else grad_weights_array(grad_weights, N))  # (N,)
        notes = [] if note is None else [note]
        args = (_kernel_input(problem.logits, logits_dtype),  # (T, N, C)
                _kernel_input(problem.targets, np.int64),  # (N, L)
                _kernel_input(problem.input_lengths, np.int64),  # (N,)
                _kernel_input(problem.target_lengths, np.int64),  # (N,)
                np.int64(problem.blank), _kernel_input(weights, np.float64))  # (N,)
        kernel = kernels.KERNELS[self.compute_dtype, grad_dtype]
        grad_type = numba.typeof(np.empty((1, 1, 1), dtype=grad_dtype))
        key = f"{logits_dtype.__name__}/{self.compute_dtype}"
        if grad_dtype != self.compute_dtype:
            key += f"/{grad_dtype}"
        if key not in self.compile_seconds:
            what = f"the {self.compute_dtype} kernel for {logits_dtype.__name__} logits"
            if grad_dtype != self.compute_dtype:
                what += f" and a {grad_dtype} gradient"
            t0 = time.perf_counter()
            hits = sum(kernel.stats.cache_hits.values())
            with said_if_slow(f"numba: compiling {what}, once (about half a minute): later "
                              f"runs load it from numba's disk cache"):
                kernel.compile(tuple(numba.typeof(a) for a in args)
                               + (numba.float64[::1], grad_type, numba.int8[::1],
                                  numba.int64[::1]))
            seconds = self.compile_seconds[key] = time.perf_counter() - t0
            notes.append(f"numba: loaded {what} from its disk cache in {seconds:.1f} s"
                         if sum(kernel.stats.cache_hits.values()) > hits else
                         f"numba: compiled {what} in {seconds:.0f} s, once: later runs load "
                         f"it from numba's disk cache in about a second")
        return kernel, args, threads, notes

    def _launch(self, kernel, args, threads, T, N, C, grad_dtype: str):
        """One call of the kernel into new outputs (the gradient one no caller holds any
        more, where there is one): ``(loss (N,), grad (T, N, C), path (N,), threads used)``."""
        loss = np.empty(N)  # (N,)
        grad = self._gradients.empty((T, N, C), grad_dtype)  # (T, N, C); all written
        from ctcbench.backends.numba.kernels import SamplePath
        path = np.full(N, SamplePath.SKIPPED, dtype=np.int8)  # (N,) the path of each sample
        if T > 0:
            threads = launch(kernel, args, loss, grad, path, threads)
        else:  # no frames: only an empty target has a path
            loss[:] = np.where(args[3] == 0, 0.0, np.inf)
        return loss, grad, path, threads

    def run(self, problem: CTCProblem, *, grad_weights=None,
            grad_dtype: str | None = None) -> "NumbaResult":
        """``grad_weights (N,)``: upstream gradient per loss (default 1), scales the gradient.
        ``grad_dtype``: ``None``, the compute dtype's gradient, or ``"float32"``: the float64
        compute's gradient rounded once to float32 by the kernel, without a float64 array in
        between (the float32 compute's is float32 anyway)."""
        T, N, C, L = problem.shape
        from ctcbench.backends.numba import kernels as k

        if grad_dtype not in (None, "float32"):
            raise ValueError(f"grad_dtype: expected None or 'float32', got {grad_dtype!r}")
        grad_dtype = grad_dtype or self.compute_dtype
        kernel, args, threads, notes = self._prepare(problem, grad_weights, grad_dtype)
        loss, grad, path, threads = self._launch(kernel, args, threads, T, N, C, grad_dtype)
        log_space = path == k.SamplePath.LOG_SPACE
        rescued = path == k.SamplePath.BLOCKED
        float32_rows, said = None, self.compute_dtype
        if self.compute_dtype == "float32":  # says what it computed in: float32 rows or not
            float32_rows = path == k.SamplePath.FAST
            in64 = (path != k.SamplePath.FAST) & (path != k.SamplePath.SKIPPED)
            if in64.any() and not float32_rows.any():
                said = "float64"
            elif in64.any():
                said = f"float32 ({int(in64.sum())} of {N} samples in float64)"
            if in64.any():
                notes.append(f"float32 compute: samples {np.flatnonzero(in64).tolist()} "
                             f"computed in float64 (the float32 rows' guards turned them down), "
                             f"gradient stored in float32")
        if rescued.any():
            notes.append(f"blocked probability-space rescue for samples "
                         f"{np.flatnonzero(rescued).tolist()}")
        if log_space.any():
            notes.append(f"log-space path for samples {np.flatnonzero(log_space).tolist()}")
        return NumbaResult(loss, grad, log_space, threads, notes, said, rescued=rescued,
                           float32_rows=float32_rows)

    def kernel(self, problem: CTCProblem):
        """What `bench` times: the kernel on the problem's arrays, converted, checked and
        compiled for once here (as a training step holds its tensors), into new outputs per
        call, as ``run`` does; returns ``(loss (N,), grad (T, N, C))``. ``run`` adds the
        conversions, the memory check (a read of /proc/meminfo, ~30 us) and the notes."""
        T, N, C, _ = problem.shape
        kernel, args, threads, _ = self._prepare(problem, None, self.compute_dtype)

        def call():
            loss, grad, _, _ = self._launch(kernel, args, threads, T, N, C, self.compute_dtype)
            return loss, grad
        return call

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank):
        """This backend's own entry point is ctcbench's: a CTCProblem of the arrays (which
        raises ValueError for malformed input), then ``run``."""
        result = self.run(CTCProblem(logits, targets, input_lengths, target_lengths, blank=blank))
        return result.loss, result.grad_logits


@dataclass
class NumbaResult:
    """The backend result; ``log_space (N,)`` marks samples computed in log space,
    ``rescued (N,)`` those the blocked probability-space rescue computed (docs/numba.md),
    and, for the float32 compute, ``float32_rows (N,)`` those computed in float32 rows (the
    rest in float64)."""

    loss: np.ndarray  # (N,)
    grad_logits: np.ndarray  # (T, N, C)
    log_space: np.ndarray = field(repr=False)  # (N,) bool
    threads: int = 1
    notes: list[str] = field(default_factory=list)
    compute_dtype: str = "float64"
    rescued: np.ndarray | None = field(default=None, repr=False)  # (N,) bool: the rescue
    float32_rows: np.ndarray | None = field(default=None, repr=False)  # (N,) bool
