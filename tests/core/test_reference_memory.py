"""THE LONG TEST: the float64 reference and ``numba`` at T = 100000, N = 4, C = 30, L = 500 in
bounded memory.

The reference's full (T, N, S) tables would need ~10 GB (3.2 GB each); its checkpointed path
keeps alpha every ~sqrt(T) frames. Measured on a shared 2-core machine, uniform logits (every
sample goes through log space):

    python -m pytest tests/core/test_reference_memory.py -m long -q
    -> numpy backend run ~115 s, peak RSS of the child ~420 MB (ru_maxrss), estimate 0.42 GiB

``numba`` checkpoints its forward rows on either path (uniform logits at this length take the
log-space one): run ~12 s on 2 threads, peak RSS of the child ~504 MB (2026-12-01).

Deselect with ``-m 'not long'``.
"""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from ctcbench.core import oracles

PEAK_LIMIT_BYTES = 1.5 * 2**30

CHILD = """
import json, sys, time, numpy as np
from ctcbench import CTCProblem, get_backend
T, N, C, L = 100000, 4, 30, 500
targets = np.random.default_rng(0).integers(1, C, size=(N, L))  # (N, L) with some repeats
problem = CTCProblem(np.zeros((T, N, C)), targets, np.array([T, T, 90000, 70000]),
                     np.array([L, 400, L, 300]))
start = time.perf_counter()
result = get_backend(sys.argv[1]).run(problem)
grad = result.grad_logits
print(json.dumps({"seconds": time.perf_counter() - start, "loss": result.loss.tolist(),
                  "targets": targets.tolist(), "row_sum": float(np.abs(grad.sum(axis=2)).max()),
                  "max_abs": float(np.abs(grad).max()), "nan": bool(np.isnan(grad).any()),
                  "padded_zero": bool((grad[90000:, 2] == 0).all() and (grad[70000:, 3] == 0).all())}))
"""

PARENT = """
import json, resource, subprocess, sys
out = subprocess.run([sys.executable, "-c", sys.argv[1], sys.argv[2]], capture_output=True,
                     text=True)
sys.stderr.write(out.stderr)
got = json.loads(out.stdout) if out.returncode == 0 else sys.exit(out.returncode)
got["peak_kb"] = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss  # Linux: kilobytes
print(json.dumps(got))
"""


@pytest.mark.long
@pytest.mark.parametrize("backend", ["numpy", "numba"])
def test_long_sequence_runs_in_bounded_memory_and_is_exact(backend):
    """T = 100000, N = 4, C = 30, L = 500: peak RSS < 1.5 GB, loss = uniform closed form,
    gradient rows sum to 0."""
    # A fresh parent whose only child is the run, so RUSAGE_CHILDREN sees no other process
    # this test session started.
    if backend == "numba":
        pytest.importorskip("numba", reason="needs numba, a dependency of ctcbench: pip install numba")
    out = subprocess.run([sys.executable, "-c", PARENT, CHILD, backend], capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    assert got["peak_kb"] * 1024 < PEAK_LIMIT_BYTES, f"peak RSS {got['peak_kb'] / 1024:.0f} MB"
    lengths, target_lengths = [100000, 100000, 90000, 70000], [500, 400, 500, 300]
    for n in range(4):
        want = oracles.uniform_loss(lengths[n], 30, got["targets"][n][:target_lengths[n]])
        assert got["loss"][n] == pytest.approx(want, rel=1e-10)
    assert got["row_sum"] < 1e-12 and got["max_abs"] <= 1.0 and not got["nan"]
    assert got["padded_zero"]
