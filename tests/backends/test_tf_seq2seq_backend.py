"""tf-seq2seq (tf_seq2seq_losses.classic_ctc_loss) against brute force and the reference, and
its second-order claim: Hessian-vector products against finite differences of the float64
reference's gradient."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from ctcbench import CTCProblem, get_backend
from ctcbench.core import oracles

from conftest import running_backend


@pytest.fixture(scope="module")
def backend():
    with running_backend("tf-seq2seq") as loaded:
        yield loaded


def test_matches_brute_force_with_infeasible_and_masked_classes(rng, backend):
    """Blank 0 and last, an infeasible sample (inf, zero gradient), a class of logit -inf, an
    empty target and ragged lengths: loss and gradient equal the enumeration of every path."""
    for blank in (0, 3):
        labels = [c for c in range(4) if c != blank]
        logits = rng.normal(size=(6, 4, 4)).astype(np.float32)
        logits[:, 2, labels[2]] = -np.inf  # sample 2 never emits this class
        targets = np.array([[labels[0], labels[0], labels[1]], [labels[1], 0, 0] if blank else
                            [labels[1], 1, 1], [labels[0], labels[1], 0], [0, 0, 0]])
        problem = CTCProblem(logits, targets, [6, 5, 6, 3], [3, 1, 2, 0], blank=blank)
        got = backend.run(problem)
        for n in range(4):
            T_n, L_n = problem.input_lengths[n], problem.target_lengths[n]
            loss, grad = oracles.brute_force(problem.logits[:T_n, n].astype(np.float64),
                                             problem.targets[n, :L_n], blank=blank)
            assert got.loss[n] == pytest.approx(loss, rel=2e-5), (blank, n)
            np.testing.assert_allclose(got.grad_logits[:T_n, n], grad, atol=5e-5)
    infeasible = CTCProblem(np.zeros((2, 1, 4), np.float32), [[1, 1, 2]], [2], [3])
    got = backend.run(infeasible)
    assert got.loss[0] == np.inf and not got.grad_logits.any()


HVP_SCRIPT = """
import json, sys
import numpy as np
from ctcbench import CTCProblem, get_backend
rng = np.random.default_rng(3)
logits = rng.normal(size=(5, 2, 4)).astype(np.float32)
problem = CTCProblem(logits, [[1, 2], [3, 0]], [5, 4], [2, 1], blank=0)
v = rng.normal(size=logits.shape).astype(np.float32)
v[4:, 1] = 0.0
hv = get_backend("tf-seq2seq", isolated=False).impl.hvp(problem, v)
json.dump({"logits": logits.tolist(), "v": v.tolist(), "hv": hv.tolist()}, sys.stdout)
"""


def test_hessian_vector_products_match_finite_differences(backend):
    """H v from differentiating tf-seq2seq's own gradient (in a fresh process, TensorFlow
    in-process) equals (g(x + h v) - g(x - h v)) / 2h of the float64 reference's gradient g."""
    out = subprocess.run([sys.executable, "-c", HVP_SCRIPT], capture_output=True, text=True,
                         check=True, timeout=300)
    data = json.loads(out.stdout)
    x, v, hv = (np.array(data[k], np.float64) for k in ("logits", "v", "hv"))
    ref = get_backend("numpy")
    h = 1e-4

    def grad(z):
        return ref.run(CTCProblem(z, [[1, 2], [3, 0]], [5, 4], [2, 1], blank=0)).grad_logits
    want = (grad(x + h * v) - grad(x - h * v)) / (2 * h)  # (T, N, C)
    assert np.abs(want).max() > 0.1  # the products are not trivially zero
    np.testing.assert_allclose(hv, want, atol=2e-4)
