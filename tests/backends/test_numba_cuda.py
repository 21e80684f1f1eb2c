"""The ``numba-cuda`` backend's kernels, run in numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1)
in a worker process, so they are checked without a GPU. Small problems only: the simulator
runs one Python thread per CUDA thread. Every answer is checked against brute-force
enumeration (ctcbench.core.oracles) or the float64 reference (the ``numpy`` backend)."""
import importlib.util

import numpy as np
import pytest

import ctcbench
from ctcbench.caselib.judge import problem_tolerance
from ctcbench.core.oracles import brute_force

pytestmark = pytest.mark.skipif(importlib.util.find_spec("numba") is None,
                                reason="numba is not installed: no CUDA simulator")

REFERENCE = ctcbench.get_backend("numpy")


@pytest.fixture(scope="module")
def sim():
    """The backend in a worker process started with the simulator on."""
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NUMBA_ENABLE_CUDASIM", "1")
        backend = ctcbench.get_backend("numba-cuda", isolated=True)
        try:
            backend.run(ctcbench.CTCProblem(np.zeros((1, 1, 2)), np.array([[1]]), [1], [1]))
        except ctcbench.BackendUnavailable as exc:  # pragma: no cover - numba without cuda
            pytest.skip(f"numba's CUDA simulator is not available here: {exc}")
        yield backend
        backend.close()


def _random_problem(seed, *, T, N, C, L, blank=0, dtype=np.float64, pad=True):
    rng = np.random.default_rng(seed)
    logits = (rng.normal(size=(T, N, C)) * 2).astype(dtype)
    labels = [c for c in range(C) if c != blank]
    target_lengths = rng.integers(0, L + 1, size=N)
    targets = rng.choice(labels, size=(N, L))
    input_lengths = rng.integers(max(1, T // 2), T + 1, size=N) if pad else np.full(N, T)
    logits[np.arange(T)[:, None] >= input_lengths[None, :]] = np.nan  # padded: never read
    return ctcbench.CTCProblem(logits, targets, input_lengths, target_lengths, blank=blank)


def _check_brute_force(problem, result):
    """Each sample against brute force on its valid frames; exactly 0 on padded frames."""
    for n in range(problem.shape[1]):
        T_n, L_n = int(problem.input_lengths[n]), int(problem.target_lengths[n])
        loss, grad = brute_force(problem.logits[:T_n, n].astype(np.float64),
                                 problem.targets[n, :L_n], blank=problem.blank)
        if np.isinf(loss):
            assert result.loss[n] == np.inf
        else:
            assert result.loss[n] == pytest.approx(loss, rel=1e-9, abs=1e-9)
        np.testing.assert_allclose(result.grad_logits[:T_n, n], grad, rtol=0, atol=1e-9)
        assert (result.grad_logits[T_n:, n] == 0).all()


def _check_reference(problem, result):
    want = REFERENCE.run(problem)
    tol = problem_tolerance(problem)
    finite = np.isfinite(want.loss)
    np.testing.assert_array_equal(np.isinf(result.loss), ~finite)
    np.testing.assert_allclose(result.loss[finite], want.loss[finite], rtol=tol.loss_rtol,
                               atol=tol.loss_atol)
    np.testing.assert_allclose(result.grad_logits, want.grad_logits, rtol=0, atol=tol.grad_atol)


@pytest.mark.parametrize("seed,blank", [(0, 0), (1, 3), (2, 1), (3, 0)])
def test_random_small_problems_against_brute_force(sim, seed, blank):
    problem = _random_problem(seed, T=5, N=3, C=4, L=3, blank=blank)
    result = sim.run(problem)
    assert result.compute_dtype == "float64"
    _check_brute_force(problem, result)


def test_repeats_against_brute_force(sim):
    logits = np.random.default_rng(4).normal(size=(6, 3, 3))
    targets = np.array([[1, 1, 1], [2, 2, 0], [1, 2, 1]])  # repeats need a blank between
    problem = ctcbench.CTCProblem(logits, targets, [6, 5, 6], [3, 2, 3])
    _check_brute_force(problem, sim.run(problem))


def test_blank_last_against_brute_force(sim):
    logits = np.random.default_rng(5).normal(size=(5, 2, 4))
    problem = ctcbench.CTCProblem(logits, np.array([[0, 2], [1, 1]]), [5, 4], [2, 2], blank=3)
    _check_brute_force(problem, sim.run(problem))


def test_infeasible_target_is_inf_with_zero_gradient(sim):
    logits = np.random.default_rng(6).normal(size=(4, 3, 3))
    # sample 0 needs 5 frames (1 1 2 2 -> 4 labels + 2 blanks between repeats > 4)
    problem = ctcbench.CTCProblem(logits, np.array([[1, 1, 2, 2], [1, 2, 0, 0], [2, 0, 0, 0]]),
                                  [4, 4, 2], [4, 2, 1])
    result = sim.run(problem)
    assert result.loss[0] == np.inf
    assert (result.grad_logits[:, 0] == 0).all()
    _check_brute_force(problem, result)


def test_neg_inf_logits_are_probability_zero(sim):
    logits = np.random.default_rng(7).normal(size=(5, 3, 4))
    logits[:, 0, 3] = -np.inf  # a masked class: gradient exactly 0 there
    logits[1, 1, 2] = -np.inf  # one frame's label masked: other paths remain
    logits[:, 2, 1] = -np.inf  # the only label never possible: loss +inf
    problem = ctcbench.CTCProblem(logits, np.array([[1, 2], [2, 1], [1, 0]]), [5, 5, 5],
                                  [2, 2, 1])
    result = sim.run(problem)
    assert (result.grad_logits[:, 0, 3] == 0).all()
    assert result.loss[2] == np.inf and (result.grad_logits[:, 2] == 0).all()
    _check_brute_force(problem, result)


def test_near_certain_target_has_a_loss_of_at_least_zero(sim):
    """The library's peaked case (logits ~1e3, the closest pair 206 apart): the loss is
    ~1e-151 and, as -log of a probability, never below 0, though a log-space sum rounds to
    -e**-206 = -4.27e-90 there (the brute-force sum too)."""
    from ctcbench.caselib.library import load_cases, select_cases
    from ctcbench.compare.checks import prepare
    case, = select_cases(load_cases(), ["negative_loss_float64_peaked"])
    problem = prepare(case, "float64").problems[0]
    result = sim.run(problem)
    assert (result.loss >= 0).all()
    loss, grad = brute_force(problem.logits[:, 0], problem.targets[0])
    assert abs(result.loss[0] - loss) <= 1e-9
    np.testing.assert_allclose(result.grad_logits[:, 0], grad, rtol=0, atol=1e-9)


def test_empty_targets_and_empty_inputs(sim):
    logits = np.random.default_rng(8).normal(size=(3, 3, 3))
    problem = ctcbench.CTCProblem(logits, np.array([[1], [1], [2]]), [3, 0, 0], [0, 0, 1])
    result = sim.run(problem)
    np.testing.assert_array_equal(result.loss[1:], [0.0, np.inf])
    _check_brute_force(problem, result)
    none = sim.run(ctcbench.CTCProblem(np.zeros((0, 2, 3)), np.array([[1], [1]]), [0, 0], [0, 1]))
    np.testing.assert_array_equal(none.loss, [0.0, np.inf])


def test_larger_problems_against_the_reference(sim):
    for seed, blank in ((10, 0), (11, 5)):
        problem = _random_problem(seed, T=14, N=3, C=6, L=5, blank=blank)
        _check_reference(problem, sim.run(problem))


@pytest.mark.long
def test_more_states_than_threads_against_the_reference(sim):
    """S = 2L + 1 = 41 states over a block of 32 threads in the simulator (up to 256 on a GPU):
    each thread strides over several states between two syncthreads."""
    rng = np.random.default_rng(16)
    problem = ctcbench.CTCProblem(rng.normal(size=(45, 2, 5)), rng.integers(1, 5, size=(2, 20)),
                                  [45, 40], [20, 17])
    _check_reference(problem, sim.run(problem))


def test_float32_within_the_float32_bound(sim):
    problem = _random_problem(12, T=12, N=3, C=5, L=4, dtype=np.float32)
    result = sim.run(problem)
    assert result.compute_dtype == "float32"
    _check_reference(problem, result)


def test_grad_weights_scale_each_sample(sim):
    problem = _random_problem(13, T=6, N=3, C=4, L=2)
    weights = np.array([2.0, 0.0, -0.5])
    result = sim.run(problem, grad_weights=weights)
    want = REFERENCE.run(problem, grad_weights=weights)
    np.testing.assert_allclose(result.grad_logits, want.grad_logits, rtol=0, atol=1e-9)


def test_two_calls_give_the_same_bits(sim):
    problem = _random_problem(14, T=10, N=2, C=5, L=4)
    first, second = sim.run(problem), sim.run(problem)
    assert first.loss.tobytes() == second.loss.tobytes()
    assert first.grad_logits.tobytes() == second.grad_logits.tobytes()


def test_unsupported_dtype(sim):
    problem = _random_problem(15, T=3, N=1, C=3, L=1, dtype=np.float16)
    with pytest.raises(ctcbench.UnsupportedProblem, match="float32/float64"):
        sim.run(problem)


def test_unavailable_without_a_gpu_or_the_simulator(monkeypatch):
    monkeypatch.delenv("NUMBA_ENABLE_CUDASIM", raising=False)
    from numba import cuda
    if cuda.is_available():  # pragma: no cover - a machine with a GPU
        pytest.skip("a CUDA device is visible")
    with pytest.raises(ctcbench.BackendUnavailable) as info:
        ctcbench.get_backend("numba-cuda")
    assert "no CUDA device is visible to numba" in info.value.reason
    assert "NUMBA_ENABLE_CUDASIM=1" in info.value.hint


def test_kernels_compile_for_the_gpu_in_both_dtypes(monkeypatch):
    """The real CUDA compiler's typing, not the simulator's Python: each kernel compiles to
    PTX for sm_90 (an H100/H200) in float32 and float64, and float32's log_softmax and
    gradient hold no float64 instruction. Needs numba's NVVM, not a GPU."""
    numba = pytest.importorskip("numba")
    from numba import cuda, float32, float64, int64
    dispatcher = pytest.importorskip("numba.cuda.dispatcher")
    if "simulator" in cuda.jit.__module__:
        pytest.skip("numba.cuda is the simulator in this process")

    class Device:  # device functions ask the current device for its compute capability
        compute_capability = (9, 0)

    monkeypatch.setattr(dispatcher, "get_current_device", lambda: Device(), raising=False)
    from ctcbench.backends.numba import cuda_kernels as kernels
    for f in (float32, float64):
        a3, a2, a1, i2, i1 = f[:, :, ::1], f[:, ::1], f[::1], int64[:, ::1], int64[::1]
        sigs = {"log_softmax": (a3, i1, a3, a2),
                "alpha_beta": (a3, a2, i2, i1, i1, int64, a3, a3, a1),
                "gradient": (a3, i2, i1, i1, int64, a3, a3, a1, a1, a3)}
        for name, sig in sigs.items():
            try:
                ptx, _ = cuda.compile_ptx(getattr(kernels, name).py_func, sig, cc=(9, 0))
            except Exception as exc:  # no NVVM here: nothing to compile with
                if "nvvm" in f"{type(exc).__name__} {exc}".lower() and "verify" not in str(exc):
                    pytest.skip(f"numba's NVVM is not available: {exc}")
                raise
            if f is float32 and name != "alpha_beta":
                assert ".f64" not in ptx, name
    assert numba.__version__
