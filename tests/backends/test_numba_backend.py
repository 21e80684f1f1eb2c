"""Backend ``numba`` against independent oracles, and its threads and dtypes."""
import math
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("numba", reason="needs numba, a dependency of ctcbench: pip install numba")

from ctcbench import CTCProblem, get_backend  # noqa: E402
from ctcbench.caselib.builders import to_problem, variants  # noqa: E402
from ctcbench.caselib.library import load_cases  # noqa: E402
from ctcbench.core import oracles  # noqa: E402
from ctcbench.runtime.threads import THREADS_ENV  # noqa: E402
from conftest import check_against_brute_force, random_problem  # noqa: E402


@pytest.fixture(scope="module")
def numba_backend():
    return get_backend("numba")



@pytest.mark.parametrize("seed", range(12))
def test_matches_brute_force_on_random_problems(numba_backend, seed):
    """Random sizes, blank at 0, middle or last, repeats, NaN padding, infeasible targets."""
    rng = np.random.default_rng(100 + seed)
    C = int(rng.integers(2, 5))
    T = int(rng.integers(1, 7)) if C < 4 else int(rng.integers(1, 6))
    problem = random_problem(rng, T=T, N=int(rng.integers(1, 5)), C=C, L=int(rng.integers(0, 4)),
                             blank=[0, C // 2, C - 1][seed % 3], feasible=seed % 2 == 0)
    check_against_brute_force(problem, numba_backend.run(problem), tol=1e-10)


@pytest.mark.parametrize("T, C, target", [
    (2000, 5, [1, 2, 3, 4] * 10),
    (4000, 30, list(range(1, 30)) * 20 + [7, 7, 7]),
    (2500, 3, [1, 1, 2, 2] * 100),
])
def test_uniform_predictions_at_long_T_match_closed_form(numba_backend, T, C, target):
    """T log C - log binom(T + L - r, 2L) at T in the thousands."""
    problem = CTCProblem(np.zeros((T, 1, C)), np.array([target]), [T], [len(target)])
    result = numba_backend.run(problem)
    assert result.loss[0] == pytest.approx(oracles.uniform_loss(T, C, target), rel=1e-10)


def test_underflowing_sample_takes_log_space_and_stays_exact(numba_backend):
    """A target the logits all but rule out underflows probability space; the log-space
    path gives the single-path closed form."""
    T, C = 6, 3
    path = [1, 2, 1, 2, 1, 2]  # the only alignment of [1, 2, 1, 2, 1, 2] in 6 frames
    logits = np.zeros((T, 1, C))
    logits[:, 0, 0] = 900.0  # blank wins by e^900: p(label) ~ 1e-391 underflows in float64
    problem = CTCProblem(logits, np.array([path]), [T], [T])
    result = numba_backend.run(problem)
    assert result.raw.log_space[0]
    assert result.loss[0] == pytest.approx(oracles.path_loss(logits[:, 0], path), rel=1e-12)
    one_hot = np.eye(C)[path]
    np.testing.assert_allclose(result.grad_logits[:, 0],
                               np.exp(oracles.log_softmax(logits[:, 0])) - one_hot, atol=1e-12)


def test_infeasible_target_is_inf_with_zero_gradient(numba_backend):
    """Too few frames for the labels and their repeats: +inf and no gradient; others unaffected."""
    rng = np.random.default_rng(5)
    logits = rng.normal(size=(4, 2, 3))
    problem = CTCProblem(logits, np.array([[1, 1, 2], [1, 2, 1]]), [3, 3], [3, 3])  # needs 4, 3
    result = numba_backend.run(problem)
    assert result.loss[0] == math.inf and not result.grad_logits[:, 0].any()
    assert result.loss[1] == pytest.approx(oracles.brute_force(logits[:3, 1], [1, 2, 1])[0],
                                           rel=1e-12)


def test_tiny_frame_sums_at_logit_scale_1e3_stay_finite_and_exact(numba_backend):
    """Found by a stress run: forward and backward rows summing to ~1e-200 each made the
    overlap guard's bound underflow to 0 and a zero overlap pass it (NaN gradient). The
    sample must go to log space and match brute force."""
    logits = np.array([[-1802.4363, -893.8869, -1206.9045, -501.8746],
                       [297.3653, -109.4911, -313.6312, -73.0431],
                       [1845.5337, 1980.4951, 1321.8176, 705.8016],
                       [-291.2271, 91.9619, -435.2149, -83.7822],
                       [-238.6606, 532.3743, 708.1218, -1113.7689]])[:, None, :]  # (5, 1, 4)
    problem = CTCProblem(logits, [[1, 2]], [5], [2])
    check_against_brute_force(problem, numba_backend.run(problem), tol=1e-10)


def test_padded_nan_frames_are_never_read(numba_backend):
    """NaN logits past input_lengths give zero gradient there and the unpadded answers."""
    rng = np.random.default_rng(11)
    problem = random_problem(rng, T=30, N=4, C=6, L=6, garbage=True)
    assert np.isnan(problem.logits).any()
    result = numba_backend.run(problem)
    assert np.isfinite(result.grad_logits).all()
    for n in range(4):
        T_n, L_n = problem.input_lengths[n], problem.target_lengths[n]
        alone = CTCProblem(problem.logits[:T_n, n:n + 1], problem.targets[n:n + 1, :L_n], [T_n],
                           [L_n])
        one = numba_backend.run(alone)
        assert result.loss[n] == one.loss[0]
        np.testing.assert_array_equal(result.grad_logits[:T_n, n], one.grad_logits[:, 0])
        assert not result.grad_logits[T_n:, n].any()


def test_empty_target_and_zero_length_input(numba_backend):
    """Empty target: -sum log p(blank); input length 0 with empty target: 0; with a label: inf."""
    logits = np.random.default_rng(4).normal(size=(6, 3, 5))
    problem = CTCProblem(logits, np.array([[1], [1], [1]]), [6, 0, 0], [0, 0, 1], blank=2)
    result = numba_backend.run(problem)
    assert result.loss[0] == pytest.approx(oracles.empty_target_loss(logits[:, 0], blank=2),
                                           rel=1e-12)
    assert result.loss[1] == 0.0 and result.loss[2] == math.inf
    assert not result.grad_logits[:, 1:].any()


def test_no_frames_at_all(numba_backend):
    """Logits of shape (0, N, C): an empty target costs 0, a label cannot be emitted (inf)."""
    problem = CTCProblem(np.zeros((0, 2, 3)), np.array([[1], [1]]), [0, 0], [0, 1])
    result = numba_backend.run(problem)
    assert result.loss.tolist() == [0.0, math.inf] and result.grad_logits.shape == (0, 2, 3)


def test_blank_last_matches_brute_force(numba_backend):
    """blank = C - 1, with repeated labels and varied lengths."""
    rng = np.random.default_rng(21)
    problem = random_problem(rng, T=5, N=4, C=4, L=3, blank=3, full_length=True)
    check_against_brute_force(problem, numba_backend.run(problem), tol=1e-10)


def test_float32_input_is_computed_in_float64(numba_backend):
    """float32 logits are widened, not rounded: the same answer as the float64 problem."""
    rng = np.random.default_rng(9)
    p32 = random_problem(rng, T=20, N=3, C=4, L=5, dtype=np.float32)
    p64 = p32.with_logits(p32.logits.astype(np.float64))
    r32, r64 = numba_backend.run(p32), numba_backend.run(p64)
    assert r32.compute_dtype == "float64"
    np.testing.assert_array_equal(r32.loss, r64.loss)
    np.testing.assert_array_equal(r32.grad_logits, r64.grad_logits)


def test_grad_weights_scale_each_sample(numba_backend):
    """grad_weights w give w[n] times each sample's own gradient (zero weight included)."""
    rng = np.random.default_rng(13)
    problem = random_problem(rng, T=15, N=3, C=5, L=4, garbage=False)
    plain = numba_backend.run(problem).grad_logits
    w = np.array([0.0, 2.5, -1.0])
    weighted = numba_backend.run(problem, grad_weights=w).grad_logits
    np.testing.assert_allclose(weighted, plain * w[None, :, None], atol=1e-15)


@pytest.fixture
def shared_batches(monkeypatch):
    """Every batch shared by the threads asked for, however small (``launch`` runs a small one
    on fewer threads, since waking a thread costs more than it saves)."""
    from ctcbench.backends.numba import backend as numba_ctc
    monkeypatch.setattr(numba_ctc, "CELLS_PER_THREAD", 0)


def test_a_small_batch_runs_on_one_thread_and_says_so(numba_backend, monkeypatch):
    """A batch of fewer DP cells than ``CELLS_PER_THREAD`` a thread runs on one: ``threads``
    says what was used, not what was asked; a large one gets both threads."""
    import numba
    from ctcbench.backends.numba.backend import CELLS_PER_THREAD
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs two numba threads: a machine with 2+ cores, or NUMBA_NUM_THREADS=2")
    monkeypatch.setenv(THREADS_ENV, "2")
    rng = np.random.default_rng(3)
    small = random_problem(rng, T=50, N=8, C=20, L=10)  # 8,400 cells
    T = 2 * CELLS_PER_THREAD // (4 * 41) + 1  # N=4 L=20: 2 x CELLS_PER_THREAD cells and more
    large = CTCProblem(rng.normal(size=(T, 4, 20)), rng.integers(1, 20, size=(4, 20)),
                       [T] * 4, [20] * 4)
    assert numba_backend.run(small).raw.threads == 1
    assert numba_backend.run(large).raw.threads == 2


def test_one_and_two_threads_give_identical_results(numba_backend, monkeypatch, shared_batches):
    """One sample is computed by one thread start to end: bit-identical for any thread count."""
    import numba
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs two numba threads: a machine with 2+ cores, or NUMBA_NUM_THREADS=2")
    rng = np.random.default_rng(17)
    problem = random_problem(rng, T=60, N=7, C=8, L=12)
    monkeypatch.setenv(THREADS_ENV, "1")
    one = numba_backend.run(problem)
    monkeypatch.setenv(THREADS_ENV, "2")
    two = numba_backend.run(problem)
    assert (one.raw.threads, two.raw.threads) == (1, 2)
    np.testing.assert_array_equal(one.loss, two.loss)
    np.testing.assert_array_equal(one.grad_logits, two.grad_logits)


@pytest.mark.long
@pytest.mark.parametrize("compute", ["float64", "float32"])
def test_one_and_two_threads_give_the_same_bits_in_either_compute(compute, monkeypatch,
                                                                   shared_batches):
    """float32 logits, either compute, peaked and random samples (float32 rows and the
    float64 paths), weighted, padded: 1 and 2 threads give the same bits."""
    import numba
    from ctcbench.backends.numba.backend import NumbaBackend
    if numba.config.NUMBA_NUM_THREADS < 2:
        pytest.skip("needs two numba threads: a machine with 2+ cores, or NUMBA_NUM_THREADS=2")
    rng = np.random.default_rng(29)
    logits, targets = _peaked(rng, 300, 4, 12, 30)
    logits[:, 2:] = rng.normal(size=(300, 2, 12)) * 3  # random frames: the float64 paths
    problem = CTCProblem(logits, targets, [300, 280, 300, 250], [30, 30, 25, 30])
    backend = NumbaBackend(compute_dtype=compute)
    runs = []
    for threads in ("1", "2"):
        monkeypatch.setenv(THREADS_ENV, threads)
        runs.append(backend.run(problem, grad_weights=[1.0, 0.5, 2.0, 1.5]))
    assert (runs[0].threads, runs[1].threads) == (1, 2)
    assert runs[0].grad_logits.dtype == np.dtype(compute)
    np.testing.assert_array_equal(runs[0].loss, runs[1].loss)
    np.testing.assert_array_equal(runs[0].grad_logits, runs[1].grad_logits)
    if compute == "float32":  # both kinds of sample were there
        assert runs[0].float32_rows[:2].all() and not runs[0].float32_rows[2:].any()


def _forward_subnormals(logits, target):
    """How many entries of the forward rows of ``logits (T, C)`` (blank 0), each row divided
    by its sum as the fast path does, are subnormal: a plain NumPy recursion, no flushing."""
    L = len(target)
    p = np.exp(logits - logits.max(1, keepdims=True))
    p /= p.sum(1, keepdims=True)
    ext = np.zeros(2 * L + 1, int)
    ext[1::2] = target
    skip = np.zeros(2 * L + 1, bool)
    skip[3::2] = target[1:] != target[:-1]
    a = np.zeros(2 * L + 1)
    a[:2] = p[0, ext[:2]]
    count = 0
    for t in range(1, len(p)):
        b = a.copy()
        b[1:] += a[:-1]
        b[2:] += np.where(skip[2:], a[:-2], 0.0)
        a = b * p[t, ext]
        a /= a.sum()
        count += int(((a > 0) & (a < np.finfo(np.float64).tiny)).sum())
    return count


def test_peaked_samples_with_subnormal_states_stay_exact(numba_backend):
    """Peaked (trained-like) logits drive the states far from the alignment through the
    subnormals, which the kernel flushes to zero (docs/numba.md, "Subnormals"): the loss and
    gradient stay within 1e-10 of the float64 reference, which keeps them."""
    rng = np.random.default_rng(5)
    logits, targets = _peaked(rng, 600, 3, 12, 60)
    logits = logits.astype(np.float64)
    assert _forward_subnormals(logits[:, 0], targets[0]) > 100  # the case is what it says
    problem = CTCProblem(logits, targets, [600, 550, 600], [60, 60, 50])
    ours, ref = numba_backend.run(problem), get_backend("numpy").run(problem)
    np.testing.assert_allclose(ours.loss, ref.loss, rtol=1e-10)
    np.testing.assert_allclose(ours.grad_logits, ref.grad_logits, rtol=0, atol=1e-10)


def _flush_state():
    """This thread's MXCSR flush bits, and a division done now whose result is subnormal."""
    from ctcbench.backends.numba.primitives import FLUSH_SUBNORMALS, fp_control
    x = np.float64(1e-308)  # a runtime value: the division below is not folded at compile time
    return fp_control() & FLUSH_SUBNORMALS, float(x / 1e3)


def test_the_threads_keep_their_subnormals_after_a_call(numba_backend, monkeypatch):
    """Subnormals are flushed inside the kernel only: after a two-thread call, the caller's
    thread and the pool's have their flush bits clear, and 1e-308 / 1e3 divided there is a
    subnormal, not 0."""
    from ctcbench.backends.numba.backend import _helper_pool
    rng = np.random.default_rng(8)
    logits, targets = _peaked(rng, 2000, 4, 12, 60)
    monkeypatch.setenv(THREADS_ENV, "2")
    result = numba_backend.run(CTCProblem(logits, targets, [2000] * 4, [60] * 4))
    tiny = np.finfo(np.float64).tiny
    bits, value = _flush_state()
    assert bits == 0 and 0 < value < tiny
    if result.raw.threads == 2:
        bits, value = _helper_pool(1).submit(_flush_state).result()
        assert bits == 0 and 0 < value < tiny


def test_a_kernel_that_raises_leaves_the_control_register_as_it_was():
    """A kernel that sets the flush bits and then raises (as an allocation failing inside it
    would): launch puts the caller's register back as it was, a flush bit the caller had set
    itself included."""
    import numba
    from ctcbench.backends.numba.backend import launch
    from ctcbench.backends.numba.primitives import (FLUSH_SUBNORMALS, fp_control, get_fp_control,
                                              restore_fp_control, set_fp_control)

    @numba.njit
    def failing(logits, targets, input_lengths, target_lengths, blank, w, loss, grad, path,
                samples):
        set_fp_control(get_fp_control() | FLUSH_SUBNORMALS)
        raise MemoryError("planted")

    N = 2
    args = (np.zeros((3, N, 4)), np.ones((N, 1), np.int64), np.full(N, 3, np.int64),
            np.ones(N, np.int64), np.int64(0), np.ones(N))
    control = ~0x3F  # MXCSR's control bits; bits 0-5 are sticky status flags, which NumPy
    before = fp_control()  # clears and any operation may set
    for own in (0, 0x8000):  # the caller's own flush-to-zero bit, off then on
        restore_fp_control(before | own)
        try:
            with pytest.raises(MemoryError, match="planted"):
                launch(failing, args, np.empty(N), np.empty((3, N, 4)), np.zeros(N, np.int8), 1)
            assert fp_control() & control == (before | own) & control
        finally:
            restore_fp_control(before)


def test_bad_thread_count_is_an_error(numba_backend, monkeypatch):
    """CTCBENCH_THREADS must be a positive integer; the message names it."""
    monkeypatch.setenv(THREADS_ENV, "zero")
    problem = random_problem(np.random.default_rng(0), T=4, N=1, C=3, L=1)
    with pytest.raises(ValueError, match=THREADS_ENV):
        numba_backend.run(problem)


def test_case_library_float64_within_1e_10_of_reference(numba_backend):
    """Every float64 problem of the case library: loss and gradient within 1e-10 (relative)
    of the float64 reference."""
    reference = get_backend("numpy")
    checked = 0
    for case in load_cases():
        if "float64" not in case.dtypes or "error" in case.expect:  # the API refuses those
            continue
        for variant in variants(case.build, case.variants, case=case.name):
            problem = to_problem(variant.raw, "float64")
            ours = numba_backend.run(problem, **variant.run_kwargs)
            ref = reference.run(problem, **variant.run_kwargs)
            where = f"{case.name} {variant.label}"
            finite = np.isfinite(ref.loss)
            np.testing.assert_array_equal(np.isfinite(ours.loss), finite, err_msg=where)
            # plus 1e-14 absolute: a loss near 0 is -log of a probability near 1, which float64
            # holds to ~1e-16 (optax_negative_loss_near_certain, 4.534537949e-8 at 50 digits:
            # numba 4.534537959e-8, the reference 4.534538020e-8)
            np.testing.assert_allclose(ours.loss[finite], ref.loss[finite], rtol=1e-10,
                                       atol=1e-14, err_msg=where)
            # gradient entries are at most 1 in size (w = 1): 1e-10 of that scale
            scale = max(np.abs(ref.grad_logits).max(initial=0.0), 1.0)
            np.testing.assert_allclose(ours.grad_logits, ref.grad_logits, rtol=0,
                                       atol=1e-10 * scale, err_msg=where)
            checked += 1
    assert checked > 10


def test_long_samples_are_checkpointed_and_match_closed_forms(numba_backend):
    """Past WHOLE_TABLE_BYTES the forward rows are recomputed segment by segment: uniform
    logits at T=60000 give the closed-form loss; a single-alignment sample (T = L, noisy
    logits favouring the path, upstream weight 0.5) the path's loss and w (softmax - one_hot)."""
    from ctcbench.backends.numba import rows
    T, C, L = 60000, 30, 40
    assert rows.segment_frames(T, L) < T
    target = [1 + j % (C - 1) for j in range(L)]
    result = numba_backend.run(CTCProblem(np.zeros((T, 1, C)), [target], [T], [L]))
    assert not result.raw.log_space[0]
    assert result.loss[0] == pytest.approx(oracles.uniform_loss(T, C, target), rel=1e-12)

    T = L = 1500
    assert rows.segment_frames(T, L) < T
    logits = np.random.default_rng(8).normal(size=(T, 1, 7))
    path = [1 + j % 6 for j in range(L)]  # no adjacent repeats: the only alignment
    logits[np.arange(T), 0, path] += 6.0  # as a trained model would: else dead-end states
    # take the forward rows' mass and the sample needs log space
    result = numba_backend.run(CTCProblem(logits, [path], [T], [L]), grad_weights=[0.5])
    assert not result.raw.log_space[0]
    assert result.loss[0] == pytest.approx(oracles.path_loss(logits[:, 0], path), rel=1e-12)
    want = 0.5 * (np.exp(oracles.log_softmax(logits[:, 0])) - np.eye(7)[path])
    np.testing.assert_allclose(result.grad_logits[:, 0], want, rtol=0, atol=1e-13)


def test_long_log_space_sample_is_checkpointed_and_exact(numba_backend):
    """A long sample that needs log space takes its checkpointed recursion: the single-path
    closed form, next to a sample that stays in probability space."""
    from ctcbench.backends.numba import rows
    T = L = 2400
    assert rows.segment_frames(T, L) < T
    path = [1 + j % 2 for j in range(L)]
    logits = np.zeros((T, 2, 3))
    logits[:, 0, 0] = 900.0  # blank wins by e^900: p(label) ~ 1e-391 underflows in float64
    logits[np.arange(T), 1, path] = 6.0  # sample 1: the same path favoured
    result = numba_backend.run(CTCProblem(logits, [path, path], [T, T], [L, L]),
                               grad_weights=[0.5, 1.0])
    assert result.raw.log_space.tolist() == [True, False]
    for n, w in enumerate([0.5, 1.0]):
        assert result.loss[n] == pytest.approx(oracles.path_loss(logits[:, n], path), rel=1e-12)
        want = w * (np.exp(oracles.log_softmax(logits[:, n])) - np.eye(3)[path])
        np.testing.assert_allclose(result.grad_logits[:, n], want, rtol=0, atol=1e-12)


def test_problem_beyond_free_memory_is_refused_before_any_work(numba_backend, monkeypatch):
    """With less memory free than the estimate (the (T, N, C) logits copy and gradient, one
    sample's tables per thread), one ValueError naming the estimate and the sizes."""
    from ctcbench.backends.numba import backend as numba_ctc
    from ctcbench.core import memory
    T, N, C, L = 100000, 4, 30, 500
    need = numba_ctc.estimate_bytes(T, N, C, L, threads=1)
    # the (T, N, C) logits copy and gradient, plus one sample's tables: never the 800 MB a
    # whole forward table of this sample would take
    assert 16 * T * N * C < need <= 16 * T * N * C + 100 * 2**20
    monkeypatch.setattr(memory, "available_bytes", lambda: need - 1)  # a machine that short
    problem = CTCProblem(np.zeros((T, N, C)), np.ones((N, L), dtype=np.int64), [T] * N, [L] * N)
    monkeypatch.setenv(THREADS_ENV, "1")
    with pytest.raises(ValueError, match=rf"^problem: expected .* GiB available .* got an "
                                         rf"estimated .* GiB for T={T}, N={N}, C={C}, L={L}$"):
        numba_backend.run(problem)


def test_polynomial_exp_and_log_are_within_2_ulp_of_numpy():
    """The branch-free exp (x <= 0, down to the subnormals) and log (1 <= x < 4) the kernels
    vectorise, against NumPy's libm-backed ones on random and edge arguments."""
    from numba import njit

    from ctcbench.backends.numba import primitives as k

    @njit
    def apply(which, x, out):
        for i in range(x.shape[0]):
            out[i] = k.exp_nonpositive(x[i]) if which == 0 else k.log_1_to_4(x[i])

    rng = np.random.default_rng(0)
    xs = [np.concatenate([-np.exp(rng.uniform(-20, np.log(745), 200000)),
                          [0.0, -0.0, -1e-300, -708.4, -709.0, -744.0, -745.0]]),
          np.concatenate([rng.uniform(1, 4, 200000),
                          [1.0, np.nextafter(1, 2), np.sqrt(2), np.nextafter(np.sqrt(2), 0),
                           2.0, 2 * np.sqrt(2), 3.0, np.nextafter(4, 0)]])]
    for which, (x, ref_fn) in enumerate(zip(xs, [np.exp, np.log])):
        out = np.empty_like(x)
        apply(which, x, out)
        ref = ref_fn(x)
        ulps = np.abs(out - ref) / np.spacing(np.abs(ref))  # spacing(0) is the least subnormal
        assert ulps.max() <= 2, (["exp", "log"][which], x[ulps.argmax()], ulps.max())
    out = np.empty(1)
    apply(0, np.array([-np.inf]), out)
    assert out[0] == 0.0


def _long_double_ctc(x, target, blank=0):
    """Loss and gradient of one sample ``x (T, C)`` by the plain log-space recursion in
    80-bit long double: no scaling, no checkpoints, NumPy's logaddexp (an oracle ~1000x more
    precise than float64, and slow: seconds at T=60000)."""
    x = x.astype(np.longdouble)
    lsm = x - x.max(axis=1, keepdims=True)
    lsm -= np.log(np.exp(lsm).sum(axis=1, keepdims=True))  # (T, C)
    S = 2 * len(target) + 1
    lab = np.array([blank if s % 2 == 0 else target[s // 2] for s in range(S)])  # (S,)
    skip = np.array([s >= 3 and s % 2 == 1 and target[s // 2] != target[s // 2 - 1]
                     for s in range(S)])  # (S,)
    T = len(x)
    la = np.full((T, S), -np.inf, dtype=np.longdouble)  # (T, S)
    lb = np.full((T, S), -np.inf, dtype=np.longdouble)  # (T, S)
    la[0, :2] = lsm[0, lab[:2]]
    for t in range(1, T):
        a = la[t - 1].copy()
        a[1:] = np.logaddexp(a[1:], la[t - 1, :-1])
        a[2:] = np.where(skip[2:], np.logaddexp(a[2:], la[t - 1, :-2]), a[2:])
        la[t] = a + lsm[t, lab]
    lb[T - 1, -2:] = 0.0
    for t in range(T - 2, -1, -1):
        g = lb[t + 1] + lsm[t + 1, lab]
        b = g.copy()
        b[:-1] = np.logaddexp(b[:-1], g[1:])
        b[:-2] = np.where(skip[2:], np.logaddexp(b[:-2], g[2:]), b[:-2])
        lb[t] = b
    post = la + lb
    post = np.exp(post - post.max(axis=1, keepdims=True))
    post /= post.sum(axis=1, keepdims=True)  # (T, S)
    grad = np.exp(lsm)
    for s in range(S):
        grad[:, lab[s]] -= post[:, s]
    return -np.logaddexp(la[T - 1, -1], la[T - 1, -2]), grad


@pytest.mark.long
@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18, reason="needs an 80-bit long double as the oracle (x86-64 Linux)")
def test_long_random_sample_keeps_its_precision(numba_backend):
    """Random logits at T=59999 fail the fast path's guards; the blocked rescue takes them
    (log space before it, whose rows would grow with T to ~1e5 and round the gradient
    1.2e-10 off unless shifted back to 0 each frame): within 1e-11 of an 80-bit oracle (the
    float64 reference is 1.2e-10 off), padded frames zero."""
    rng = np.random.default_rng(1)
    T, C, L = 60100, 5, 40
    logits = rng.normal(size=(T, 2, C))
    targets = rng.integers(1, C, size=(2, L))
    result = numba_backend.run(CTCProblem(logits, targets, [T, 59999], [L, L - 1]))
    assert result.raw.rescued.all()
    loss, grad = _long_double_ctc(logits[:59999, 1], list(targets[1, :L - 1]))
    assert result.loss[1] == pytest.approx(float(loss), rel=1e-13)
    np.testing.assert_allclose(result.grad_logits[:59999, 1], grad.astype(np.float64), rtol=0,
                               atol=1e-11)
    assert not result.grad_logits[59999:, 1].any()


@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18, reason="needs an 80-bit long double as the oracle (x86-64 Linux)")
def test_blocked_rescue_matches_long_double_oracle(numba_backend):
    """Random N(0,1) logits at T=3000 C=10 L=120 fail the fast path's guards (the normalised
    forward and backward rows stop overlapping): the blocked rescue takes both samples, padded
    and weighted, within 1e-12 (loss) and 1e-11 (gradient) of the 80-bit recursion."""
    rng = np.random.default_rng(3)
    T, C, L = 3000, 10, 120
    logits = rng.normal(size=(T, 2, C))
    targets = rng.integers(1, C, size=(2, L))
    targets[0, 10:14] = 3  # repeats: no skip there
    lengths = [T, 2900]
    w = [0.5, 1.0]
    result = numba_backend.run(CTCProblem(logits, targets, lengths, [L, L - 7]),
                               grad_weights=w)
    assert result.raw.rescued.all() and not result.raw.log_space.any()
    for n, (T_n, L_n) in enumerate(zip(lengths, [L, L - 7])):
        loss, grad = _long_double_ctc(logits[:T_n, n], list(targets[n, :L_n]))
        assert result.loss[n] == pytest.approx(float(loss), rel=1e-12)
        np.testing.assert_allclose(result.grad_logits[:T_n, n], w[n] * grad.astype(np.float64),
                                   rtol=0, atol=1e-11)
        assert not result.grad_logits[T_n:, n].any()


@pytest.mark.long
@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18, reason="needs an 80-bit long double as the oracle (x86-64 Linux)")
@pytest.mark.parametrize("T, C, L", [(16000, 100, 200), (6000, 100, 1000)])
def test_random_logits_at_long_T_stay_in_probability_space(numba_backend, T, C, L):
    """Random N(0, 1) logits where one scale per row cannot hold alpha or beta (they span
    thousands of nats across a row; the tilted rescue before fell to log space here): the
    blocked rescue takes them, within 1e-12 (loss) and 1e-11 (gradient) of the 80-bit
    recursion."""
    rng = np.random.default_rng(T + L)
    logits = rng.normal(size=(T, 1, C))
    target = rng.integers(1, C, size=(1, L))
    result = numba_backend.run(CTCProblem(logits, target, [T], [L]))
    assert result.raw.rescued.all()
    loss, grad = _long_double_ctc(logits[:, 0], list(target[0]))
    assert result.loss[0] == pytest.approx(float(loss), rel=1e-12)
    np.testing.assert_allclose(result.grad_logits[:, 0], grad.astype(np.float64), rtol=0,
                               atol=1e-11)


@pytest.mark.parametrize("seed", range(40))
def test_blocked_rescue_by_itself_matches_reference(seed):
    """The blocked rescue called directly (the fast path takes most of these) on random
    problems: targets shorter and longer than a block (16 pairs), at and around block
    edges, repeats, input lengths down to the tightest fit, peaked and flat logits; against
    the float64 NumPy reference, 1e-10; a guard that declines (NaN) fails too."""
    from ctcbench.backends.numba import blocks
    from ctcbench.backends.numpy_ref import NumpyBackend
    rng = np.random.default_rng(900 + seed)
    L = int(rng.choice([1, 2, 15, 16, 17, 31, 32, 33, 47, 64, int(rng.integers(1, 90))]))
    C = int(rng.integers(3, 40))
    target = rng.integers(1, C, size=L).astype(np.int64)
    if seed % 3 == 0:
        target[rng.integers(0, L, size=max(1, L // 4))] = target[0]  # repeats
    repeats = int(np.sum(target[1:] == target[:-1]))
    T = L + repeats + int(rng.choice([0, 1, 3, int(rng.integers(0, 4 * L + 50))]))
    logits = rng.normal(size=(T, 1, C)) * float(rng.choice([0.5, 1.0, 3.0, 8.0]))
    skip = np.zeros(L + 1)
    skip[1:L] = target[1:] != target[:-1]
    grad = np.empty((T, 1, C))
    loss = blocks.sample_blocked(logits, grad, 0, 0, target, T, L, 0, 1.0, skip)
    want = NumpyBackend().run(CTCProblem(logits, target[None], [T], [L]))
    assert loss == pytest.approx(want.loss[0], rel=1e-10, abs=1e-10)
    np.testing.assert_allclose(grad[:, 0], want.grad_logits[:, 0], rtol=0, atol=1e-10)


@pytest.mark.long
@pytest.mark.skipif(np.finfo(np.longdouble).eps > 1e-18, reason="needs an 80-bit long double as the oracle (x86-64 Linux)")
def test_log_space_path_keeps_its_precision_at_long_T():
    """The log-space path by itself (the rescue takes random logits now, so called directly)
    at T=59999: its rows are shifted back to 0 each frame, else they grow to ~1e5 and round
    the gradient 1.2e-10 off; within 1e-11 of the 80-bit oracle."""
    from ctcbench.backends.numba import rescue
    rng = np.random.default_rng(1)
    T, C, L = 59999, 5, 39
    logits = rng.normal(size=(T, 1, C))
    target = rng.integers(1, C, size=L).astype(np.int64)
    grad = np.empty((T, 1, C))
    loss = rescue.sample_log_space(logits, grad, 0, 0, target, T, L, 0, 1.0)
    want_loss, want_grad = _long_double_ctc(logits[:, 0], list(target))
    assert loss == pytest.approx(float(want_loss), rel=1e-13)
    np.testing.assert_allclose(grad[:, 0], want_grad.astype(np.float64), rtol=0, atol=1e-11)


def test_results_do_not_depend_on_thread_count_or_allocator_state(numba_backend, monkeypatch,
                                                                   shared_batches):
    """A loop that stores and sums gets a runtime alias check whose scalar fallback adds in
    another order; with a sample's arrays allocated apart, its outcome followed the
    allocator and 1 and 2 threads differed in the last bit. Random problems (fast path and
    rescue), 1 and 2 threads, other allocations in between: the same bits every time."""
    import numba
    rng = np.random.default_rng(23)
    problems = [random_problem(rng, T=int(rng.integers(5, 90)), N=int(rng.integers(1, 6)),
                               C=int(rng.integers(3, 30)), L=int(rng.integers(0, 20)))
                for _ in range(8)]
    logits = rng.normal(size=(3000, 2, 10))  # long random samples: the blocked rescue
    problems.append(CTCProblem(logits, rng.integers(1, 10, size=(2, 120)), [3000, 2950],
                               [120, 117]))
    counts = [1, 2] if numba.config.NUMBA_NUM_THREADS >= 2 else [1, 1]
    for problem in problems:
        runs = []
        for threads in counts * 2:
            junk = [np.empty(int(rng.integers(1, 300))) for _ in range(int(rng.integers(0, 40)))]
            monkeypatch.setenv(THREADS_ENV, str(threads))
            runs.append(numba_backend.run(problem))
            del junk
        for other in runs[1:]:
            np.testing.assert_array_equal(other.loss, runs[0].loss)
            np.testing.assert_array_equal(other.grad_logits, runs[0].grad_logits)
    assert runs[0].raw.rescued.any()


# -- the opt-in float32 compute --------------------------------------------------------------
@pytest.fixture(scope="module")
def numba_float32():
    from ctcbench.backends.numba.backend import NumbaBackend
    from ctcbench.runtime.protocol import BackendTraits
    from ctcbench.runtime.registry import LoadedBackend
    impl = NumbaBackend(compute_dtype="float32")
    return LoadedBackend("numba", impl, BackendTraits.of(impl))


def _within_float32_bound(problem, result, want_loss, want_grad, where=""):
    """The case library's float32 tolerance (``problem_tolerance``, what fuzz uses)."""
    from ctcbench.caselib.judge import problem_tolerance
    tol = problem_tolerance(problem.with_logits(problem.logits.astype(np.float32)))
    finite = np.isfinite(want_loss)
    np.testing.assert_array_equal(np.isfinite(result.loss), finite, err_msg=where)
    np.testing.assert_allclose(result.loss[finite], want_loss[finite], rtol=tol.loss_rtol,
                               atol=tol.loss_atol, err_msg=where)
    np.testing.assert_allclose(result.grad_logits, want_grad, rtol=0, atol=tol.grad_atol,
                               err_msg=where)


def test_compute_dtype_is_checked_and_float64_by_default(numba_backend):
    from ctcbench.backends.numba.backend import NumbaBackend
    with pytest.raises(ValueError, match="compute_dtype: expected one of float64, float32"):
        NumbaBackend(compute_dtype="float16")
    assert numba_backend.impl.compute_dtype == "float64"


@pytest.mark.long
@pytest.mark.parametrize("seed", range(6))
def test_float32_compute_matches_brute_force_within_the_float32_bound(numba_float32, seed):
    """Random small problems (blank anywhere, repeats, padding, infeasible targets) against
    enumeration over all paths, at the float32 tolerance; the result says float32."""
    from conftest import brute_force_batch
    rng = np.random.default_rng(300 + seed)
    C = int(rng.integers(2, 5))
    problem = random_problem(rng, T=int(rng.integers(1, 6)), N=int(rng.integers(1, 5)), C=C,
                             L=int(rng.integers(0, 4)), blank=[0, C // 2, C - 1][seed % 3],
                             feasible=seed % 2 == 0, dtype=np.float32)
    result = numba_float32.run(problem)
    assert result.compute_dtype == "float32"
    want_loss, want_grad = brute_force_batch(problem)
    _within_float32_bound(problem, result, want_loss, want_grad)


@pytest.mark.long
def test_float32_compute_on_the_case_library(numba_float32):
    """Every float32 problem of the case library within the float32 bound of the float64
    reference."""
    reference = get_backend("numpy")
    checked = 0
    for case in load_cases():
        if "float32" not in case.dtypes or "error" in case.expect:
            continue
        for variant in variants(case.build, case.variants, case=case.name):
            problem = to_problem(variant.raw, "float32")
            ours = numba_float32.run(problem, **variant.run_kwargs)
            ref = reference.run(problem, **variant.run_kwargs)
            _within_float32_bound(problem, ours, ref.loss, ref.grad_logits,
                                  where=f"{case.name} {variant.label}")
            checked += 1
    assert checked > 10


def _peaked(rng, T, N, C, L):
    """Logits shaped like a trained model's (each frame favours the label a linear alignment
    is at, blanks between labels) and their targets: what float32 rows hold."""
    targets = rng.integers(1, C, size=(N, L))
    logits = rng.normal(size=(T, N, C))
    pos = np.arange(T) * L // T
    for n in range(N):
        logits[np.arange(T), n, targets[n, pos]] += 4
        logits[(np.arange(T) % (T // L)) >= (T // L) // 2, n, 0] += 5
    return logits.astype(np.float32), targets


@pytest.mark.long
@pytest.mark.parametrize("T, L", [(300, 40), (21000, 200)])
def test_float32_rows_on_peaked_samples(numba_float32, T, L):
    """Peaked samples stay in float32 rows, checkpointed past WHOLE_TABLE_BYTES (T=21000
    L=200 is 34 MB of float32 rows), within the float32 bound of the reference."""
    from ctcbench.backends.numba.rows import WHOLE_TABLE_BYTES, segment_frames
    rng = np.random.default_rng(T)
    N = 3 if T < 1000 else 1
    logits, targets = _peaked(rng, T, N, 12, L)
    problem = CTCProblem(logits, targets, [T] * N, [L] * N)
    result = numba_float32.run(problem, grad_weights=[1.5] * N)
    assert result.raw.float32_rows.all(), result.notes
    assert result.compute_dtype == "float32"
    assert (4 * T * (2 * L + 3) > WHOLE_TABLE_BYTES) == (T > 1000)
    assert (segment_frames.py_func(T, L, 4) < T) == (T > 1000)  # checkpointed
    ref = get_backend("numpy").run(problem, grad_weights=[1.5] * N)
    _within_float32_bound(problem, result, ref.loss, ref.grad_logits)


@pytest.mark.long
def test_near_certain_samples_stay_in_float32_rows(numba_float32):
    """Short, near-certain samples: float32 rows may round their loss a little below 0, and
    such a sample is still a float32 answer (not handed to float64)."""
    rng = np.random.default_rng(11)
    T, N, C, L = 6, 64, 5, 3
    targets = rng.integers(1, C, size=(N, L))
    logits = rng.normal(size=(T, N, C))
    for n in range(N):  # the frames spell the target, blanks between: one likely path
        for t, c in enumerate([targets[n, 0], 0, targets[n, 1], 0, targets[n, 2], 0]):
            logits[t, n, c] += rng.uniform(20, 40)
    problem = CTCProblem(logits.astype(np.float32), targets, [T] * N, [L] * N)
    result = numba_float32.run(problem)
    assert (result.loss < 0).any()  # the case this is about
    assert result.raw.float32_rows.all(), result.notes
    ref = get_backend("numpy").run(problem)
    _within_float32_bound(problem, result, ref.loss, ref.grad_logits)


@pytest.mark.long
def test_float32_compute_says_which_samples_it_computed_in_float64(numba_float32):
    """A batch of a peaked sample (float32 rows hold it) and a long random one (they do not):
    each within the float32 bound, and the result says 1 of 2 in float64."""
    rng = np.random.default_rng(7)
    T, C, L = 1200, 20, 80
    logits, targets = _peaked(rng, T, 2, C, L)
    logits[:, 1] = rng.normal(size=(T, C))
    problem = CTCProblem(logits, targets, [T, T], [L, L])
    result = numba_float32.run(problem)
    assert result.raw.float32_rows.tolist() == [True, False]
    assert result.compute_dtype == "float32 (1 of 2 samples in float64)"
    ref = get_backend("numpy").run(problem)
    _within_float32_bound(problem, result, ref.loss, ref.grad_logits)


@pytest.mark.long
def test_float32_compute_on_long_random_samples(numba_float32, monkeypatch, shared_batches):
    """Long random samples do not fit float32 rows (their normalised forward and backward rows
    stop overlapping within float32's range) and are handed to the float64 paths: within the
    float32 bound of the reference, said in a note, the same bits for 1 and 2 threads."""
    import numba
    rng = np.random.default_rng(31)
    T, C, L = 1200, 20, 80
    logits = rng.normal(size=(T, 3, C)).astype(np.float32)
    problem = CTCProblem(logits, rng.integers(1, C, size=(3, L)), [T, 1100, 900], [L, 70, L])
    runs = []
    for threads in ([1, 2] if numba.config.NUMBA_NUM_THREADS >= 2 else [1]):
        monkeypatch.setenv(THREADS_ENV, str(threads))
        runs.append(numba_float32.run(problem, grad_weights=[1.0, 0.5, 2.0]))
    ref = get_backend("numpy").run(problem, grad_weights=[1.0, 0.5, 2.0])
    _within_float32_bound(problem, runs[0], ref.loss, ref.grad_logits)
    assert not runs[0].raw.float32_rows.any()
    assert runs[0].compute_dtype == "float64"  # what it computed in, not what was asked
    assert any("computed in float64" in note for note in runs[0].notes)
    for other in runs[1:]:
        np.testing.assert_array_equal(other.loss, runs[0].loss)
        np.testing.assert_array_equal(other.grad_logits, runs[0].grad_logits)


@pytest.mark.long
def test_a_first_compile_is_said_while_it_runs_and_a_load_from_the_cache_is_not(tmp_path):
    """The first float32 step of ``ctcbench.torch.ctc_loss`` with an empty numba cache compiles
    its kernel (~20 s), and stderr says so while it does; the next process loads the kernel
    from the cache and says nothing."""
    step = ("import torch, ctcbench.torch as ct; x = torch.randn(20, 2, 5).log_softmax(2)"
            ".requires_grad_(); ct.ctc_loss(x, torch.tensor([[1, 2], [3, 4]]), [20, 20], "
            "[2, 2]).backward()")
    env = {**os.environ, "NUMBA_CACHE_DIR": str(tmp_path)}
    first, again = (subprocess.run([sys.executable, "-c", step], env=env, capture_output=True,
                                   text=True, timeout=600) for _ in range(2))
    assert first.returncode == 0 and again.returncode == 0, first.stderr + again.stderr
    assert ("numba: compiling the float64 kernel for float32 logits and a float32 gradient, "
            "once" in first.stderr), first.stderr
    assert "numba: compiling" not in again.stderr, again.stderr
