"""Shared fixtures: random CTC problems of any shape, with controllable blank and padding."""
from __future__ import annotations

import contextlib
import textwrap

import numpy as np
import pytest

import ctcbench
from ctcbench import CTCProblem


def random_problem(rng: np.random.Generator, *, T: int, N: int, C: int, L: int, blank: int = 0,
                   dtype=np.float64, scale: float = 2.0, garbage: bool = True,
                   full_length: bool = False, feasible: bool = True) -> CTCProblem:
    """A random problem: lengths vary per sample; padded frames hold NaN when ``garbage``.

    With ``feasible`` every target fits its input (L + repeats <= input length).
    """
    labels = np.array([c for c in range(C) if c != blank])
    logits = (rng.normal(size=(T, N, C)) * scale).astype(dtype)  # (T, N, C)
    targets = rng.choice(labels, size=(N, max(L, 1)))  # (N, L)
    target_lengths = rng.integers(0, L + 1, size=N)
    input_lengths = np.full(N, T) if full_length else rng.integers(0, T + 1, size=N)
    if feasible:
        for n in range(N):
            t = targets[n, : target_lengths[n]]
            need = len(t) + int((t[1:] == t[:-1]).sum())
            input_lengths[n] = max(input_lengths[n], min(need, T))
            while target_lengths[n] and len(t) + int((t[1:] == t[:-1]).sum()) > input_lengths[n]:
                target_lengths[n] -= 1
                t = targets[n, : target_lengths[n]]
    if garbage:
        for n in range(N):
            logits[input_lengths[n]:, n] = np.nan
    return CTCProblem(logits, targets, input_lengths, target_lengths, blank=blank)


# The tests of the `long` marker besides the one marked at its definition: each took 4 s or
# more (`pytest --durations=120` on the 2-core machine, 2026-12-02), or needs what no quick
# test needs (numba's float32 compute: ~70 s of cold compile; its float64 kernel storing a
# float32 gradient, ctcbench.torch's: ~15-24 s; the whole library's compare; a trained
# model). The README's test command leaves them out (pyproject's addopts: -m 'not long');
# CI runs them too (`pytest -m long`, .ci/run).
# a project under test that tests/function/test_ci_recipes.py copies and runs, not our tests
collect_ignore = ["function/scratch"]

LONG = {
    "atlas/test_versions.py::test_the_release_matrix_is_on_the_page",
    "atlas/test_versions.py::test_an_older_optax_runs_the_optax_entries_and_a_missing_one_is_said",
    "doctor/test_monitors.py::test_keras_fit_reports_a_planted_fault_at_step_0_and_a_healthy_run_never",
    "function/test_ci_recipes.py::test_each_recipe_passes_a_correct_binding_and_fails_the_planted_bug",
    "backends/test_numba_backend.py::test_a_first_compile_is_said_while_it_runs_and_a_load_from_the_cache_is_not",
    "backends/test_numba_backend.py::test_float32_compute_matches_brute_force_within_the_float32_bound",
    "backends/test_numba_backend.py::test_float32_compute_on_long_random_samples",
    "backends/test_numba_backend.py::test_float32_compute_on_the_case_library",
    "backends/test_numba_backend.py::test_float32_compute_says_which_samples_it_computed_in_float64",
    "backends/test_numba_backend.py::test_float32_rows_on_peaked_samples",
    "backends/test_numba_backend.py::test_log_space_path_keeps_its_precision_at_long_T",
    "backends/test_numba_backend.py::test_long_random_sample_keeps_its_precision",
    "backends/test_numba_backend.py::test_near_certain_samples_stay_in_float32_rows",
    "backends/test_numba_backend.py::test_one_and_two_threads_give_the_same_bits_in_either_compute",
    "backends/test_numba_backend.py::test_random_logits_at_long_T_stay_in_probability_space",
    "backends/test_numba_cuda.py::test_more_states_than_threads_against_the_reference",
    "bench/test_bench_timing.py::test_isolated_kernel_time_is_measured_in_the_worker_without_the_round_trip",
    "cli/test_cli_datasheet.py::test_a_torn_precision_search_resumes_without_running_a_trial_twice",
    "cli/test_cli_datasheet.py::test_resume_after_a_torn_log_keeps_each_probe_once",
    "cli/test_cli_fuzz.py::test_cli_through_entry_point_replays_failures_first",
    "cli/test_cli_fuzz.py::test_numba_fuzzes_clean_against_the_reference",
    "compare/test_compare.py::test_run_folder_has_rows_and_environment",
    "compare/test_compare.py::test_unavailable_and_unsupported_are_recorded_not_failed",
    "compare/test_compare.py::test_whole_library_passes_for_every_available_backend",
    "compare/test_compare.py::test_wrong_plugin_through_entry_point_fails_the_gate",
    "convergence/test_convergence_grid.py::test_grid_in_parallel_workers_writes_everything",
    "convergence/test_convergence_grid.py::test_registry_ctc_backend_trains_like_torch",
    "convergence/test_convergence_predict.py::test_predict_errors",
    "convergence/test_convergence_predict.py::test_predict_reads_unseen_lines",
    "convergence/test_convergence_predict.py::test_predict_table_and_beam",
    "convergence/test_convergence_resume.py::test_a_curve_torn_at_any_byte_resumes_to_the_uninterrupted_grid",
    "convergence/test_convergence_resume.py::test_a_torn_grid_row_resumes_to_the_uninterrupted_grid",
    "convergence/test_convergence_tables.py::test_never_reached_steps_are_empty_in_tables_and_csv_and_null_in_json",
    "convergence/test_executors.py::test_dask_cluster_gives_the_local_pools_curves",
    "convergence/test_executors.py::test_killed_worker_resumes_its_run_from_the_checkpoint",
    "convergence/test_executors.py::test_unreachable_scheduler_is_a_clean_cli_error",
    "convergence/test_scenarios.py::test_a_whole_scenario_runs_resumes_and_refuses_a_second_start",
    "core/test_memory.py::test_estimate_bounds_the_measured_peak_on_both_paths",
    "datasheet/test_limits.py::test_a_planted_cliff_is_reported_exactly",
    "datasheet/test_precision.py::test_a_count_of_trials_is_the_same_search_at_any_budget",
    "datasheet/test_precision.py::test_a_planted_drift_is_found_and_its_case_reproduces_it",
    "datasheet/test_precision.py::test_a_worst_case_inside_the_space_is_climbed_to",
    "datasheet/test_robustness.py::test_a_raw_call_that_segfaults_is_marked_crashes",
    "datasheet/test_robustness.py::test_raises_and_hangs_and_no_hook",
    "decoding/test_thirdparty.py::test_framework_greedy_is_the_collapsed_argmax_path",
    "decoding/test_thirdparty.py::test_framework_exact_beam_returns_the_most_probable_labelling",
    "decoding/test_thirdparty.py::test_keras_jax_beam_returns_the_most_probable_labelling",
    "decoding/test_thirdparty.py::test_tf_beam_v1_merges_repeated_labels_a_second_time",
    "decoding/test_thirdparty.py::test_tf_beam_v1_decodes_the_issues_a_a_blank_a_a_to_a",
    "decoding/test_thirdparty.py::test_tf_beam_float32_scores_carry_its_normalisers_rounding",
    "decoding/test_thirdparty.py::test_framework_ragged_batch_decodes_each_sample_as_alone",
    "fuzz/test_campaign.py::test_a_clean_backend_gives_one_row_per_search",
    "fuzz/test_campaign.py::test_a_killed_worker_still_ends_the_campaign",
    "fuzz/test_campaign.py::test_a_wrong_plugin_is_found_once_and_resumed",
    "fuzz/test_fuzz.py::test_a_backend_differing_on_some_calls_only_fails_compare_on_its_case",
    "fuzz/test_fuzz.py::test_a_failure_past_256_labels_shrinks_to_257",
    "fuzz/test_fuzz.py::test_float16_is_judged_by_its_round_off",
    "fuzz/test_fuzz.py::test_two_different_answers_are_found_unless_declared",
    "fuzz/test_fuzz.py::test_wrong_backend_is_found_shrunk_and_fails_compare",
    "report/test_report.py::test_each_command_writes_report_html_into_its_run_folder",
    "runs/test_resume.py::test_bench_torn_anywhere_resumes_to_one_row_per_key",
    "runs/test_resume.py::test_fuzz_torn_resumes_to_one_row_per_search",
    "runs/test_store.py::test_a_finished_run_folder_is_readable_as_the_umask_allows_and_holds_no_lock",
    "runs/test_store.py::test_a_second_writer_is_refused_naming_the_holder",
    "runs/test_store.py::test_bench_killed_mid_run_resumes_to_one_row_per_key",
    "runs/test_store.py::test_compare_killed_mid_run_resumes_to_one_row_per_key",
    "runs/test_store.py::test_convergence_killed_mid_run_resumes_to_one_row_per_run",
    "runs/test_store.py::test_killed_grid_leaves_no_worker_training",
    "test_readme.py::test_plugin_example_passes_the_whole_case_library",
    "test_torch_loss.py::test_float32_compute_when_asked_and_it_says_so",
    "test_torch_loss.py::test_float32_tensors_get_the_float64_gradient_rounded_once",
}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.nodeid.split("[")[0].removeprefix("tests/") in LONG:
            item.add_marker(pytest.mark.long)


@pytest.fixture
def rng():
    return np.random.default_rng(1234)


TOY_PLUGIN = '''
import numpy as np
from ctcbench import BackendUnavailable


class UniformGuess:
    """A toy plugin: returns T*log(C) per sample and a zero gradient."""

    def run(self, problem):
        T, N, C, _ = problem.shape

        class Result:
            loss = problem.input_lengths * np.log(C)
            grad_logits = np.zeros((T, N, C))
        return Result()


class NeedsGpu:
    def __init__(self):
        raise BackendUnavailable("no accelerator here", "pip install toy-gpu")
'''


@pytest.fixture
def installed_plugin(tmp_path, monkeypatch):
    """A real distribution on sys.path declaring two entry points in group ctcbench.backends:
    ``toy`` (runs, wrong on purpose) and ``toy-gpu`` (unavailable)."""
    (tmp_path / "toy_ctc.py").write_text(TOY_PLUGIN)
    dist = tmp_path / "toy_ctc-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-ctc\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(
        "[ctcbench.backends]\ntoy = toy_ctc:UniformGuess\ntoy-gpu = toy_ctc:NeedsGpu\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def registered_for_one_test(monkeypatch, register_backends, plugins: dict):
    """For an autouse fixture (``yield from``): register ``plugins`` (name -> "module:attr"),
    one thread each, for one test; stop their worker processes afterwards."""
    from ctcbench.runtime.worker import shutdown_workers
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    for name, spec in plugins.items():
        register_backends(name, spec)
    yield
    shutdown_workers()


@pytest.fixture
def register_backends():
    """``add(name, factory)`` registers a backend for one test through the public API;
    every name it added is unregistered afterwards."""
    added = []

    def add(name: str, factory) -> None:
        ctcbench.register_backend(name, factory)
        added.append(name)
    yield add
    for name in reversed(added):
        if name in ctcbench.runtime.registry.backend_names():
            ctcbench.unregister_backend(name)


def spike_paths(problem: CTCProblem) -> np.ndarray:
    """``(T, N)`` class per frame of a trained model's alignment: one-frame label spikes,
    evenly spaced, blank elsewhere (or the minimal path stretched when frames are scarce)."""
    T, N, _, _ = problem.shape
    blank = problem.blank
    paths = np.full((T, N), blank, dtype=np.int64)
    for n in range(N):
        y = problem.targets[n, : problem.target_lengths[n]].tolist()
        length = int(problem.input_lengths[n])
        if not y:
            continue
        if length >= 2 * len(y):
            for k, label in enumerate(y):
                paths[int((k + 0.5) * length / len(y)), n] = label
            continue
        minimal = []
        for k, label in enumerate(y):
            minimal += [blank, label] if k and label == y[k - 1] else [label]
        paths[:length, n] = [minimal[t * len(minimal) // length] for t in range(length)]
    return paths


def trained_log_probs(rng: np.random.Generator, problem: CTCProblem, *, peak: float = 8.0,
                      noise: float = 1.0, paths: np.ndarray | None = None) -> np.ndarray:
    """``(T, N, C)`` log_softmax of noisy logits peaked on ``paths`` (default: spike paths),
    like a trained model's output; padded frames hold NaN."""
    T, N, C, _ = problem.shape
    paths = spike_paths(problem) if paths is None else paths
    logits = rng.normal(size=(T, N, C)) * noise  # (T, N, C)
    logits[np.arange(T)[:, None], np.arange(N)[None, :], paths] += peak
    logits -= logits.max(-1, keepdims=True)
    lp = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
    lp[~problem.frame_mask] = np.nan
    return lp


@pytest.fixture
def tiny_grid(tmp_path):
    """A one-size bench grid file (JSON), fast enough for the CLI tests."""
    path = tmp_path / "grid.json"
    path.write_text('[{"T": 20, "N": 2, "C": 5, "L": 4}]')
    return path


# -- convergence: tiny configs and one short run that really learns ------------------------
def tiny_train_config(**overrides):
    """A training config small enough for a unit test (seconds, not minutes)."""
    from ctcbench.convergence.data import DataConfig
    from ctcbench.convergence.models import ModelConfig
    from ctcbench.convergence.train import TrainConfig
    data = DataConfig(train_size=64, test_size=16, min_len=1, max_len=3, width=64)
    model = ModelConfig(channels=4, hidden=8)
    base = dict(steps=4, batch_size=8, eval_every=2, model=model, data=data)
    base.update(overrides)
    return TrainConfig(**base)


@pytest.fixture(scope="session")
def learned_run(tmp_path_factory):
    """One short real training run (about a minute on 2 cores) that must learn; shared by the
    training and prediction tests. Returns (summary, run_dir, config)."""
    import torch

    from ctcbench.convergence.data import DataConfig
    from ctcbench.convergence.models import ModelConfig
    from ctcbench.convergence.train import TrainConfig, train_run
    torch.set_num_threads(1)
    cfg = TrainConfig(optimizer="adam", lr=3e-3, steps=LEARN_STEPS, batch_size=16, eval_every=50,
                      model=ModelConfig(name="crnn", batchnorm=True, channels=8, hidden=32),
                      data=DataConfig(kind="lines", charset="0123456789", min_len=2, max_len=4,
                                      width=64, train_size=1500, test_size=64))
    run_dir = tmp_path_factory.mktemp("learned")
    summary = train_run(cfg, run_dir)
    return summary, run_dir, cfg


LEARN_STEPS = 300


def check_against_brute_force(problem, result, tol=1e-9):
    """Every sample's loss and gradient equal the enumeration over all paths (a backend's
    ``result`` for ``problem``); padded frames and infeasible samples get zero gradient."""
    import math

    from ctcbench.core import oracles
    for n in range(problem.shape[1]):
        T_n, L_n = problem.input_lengths[n], problem.target_lengths[n]
        logits = problem.logits[:T_n, n].astype(np.float64)
        loss, grad = oracles.brute_force(logits, problem.targets[n, :L_n], blank=problem.blank)
        if math.isinf(loss):
            assert result.loss[n] == math.inf
            assert not result.grad_logits[:, n].any()
            continue
        assert result.loss[n] == pytest.approx(loss, rel=tol, abs=tol)
        np.testing.assert_allclose(result.grad_logits[:T_n, n], grad, atol=tol)
        assert not result.grad_logits[T_n:, n].any(), "padded frames must get zero gradient"


def brute_force_batch(problem):
    """Per-sample brute-force loss ``(N,)`` and gradient ``(T, N, C)`` of a whole problem
    (gradient 0 for infeasible samples and padded frames)."""
    import math

    from ctcbench.core import oracles
    T, N, C, _ = problem.shape
    loss, grad = np.zeros(N), np.zeros((T, N, C))
    for n in range(N):
        T_n, L_n = problem.input_lengths[n], problem.target_lengths[n]
        loss[n], g = oracles.brute_force(problem.logits[:T_n, n], problem.targets[n, :L_n],
                                         blank=problem.blank)
        if math.isfinite(loss[n]):
            grad[:T_n, n] = g
    return loss, grad


# The source of tests/wrong_backends.py, for tests that install it as a plugin distribution.
WRONG_BACKENDS_SOURCE = (__import__("pathlib").Path(__file__).parent / "wrong_backends.py").read_text()


# one case in the case-file format, its name and oracle to fill in
MINIMAL_CASE = """
[[case]]
name = "{name}"
description = "one sample"
provenance = "test"
[case.build]
generator = "random"
C = 3
[[case.build.sample]]
target = [1]
T = 2
[case.expect]
oracle = "{oracle}"
"""


@pytest.fixture(scope="module")
def one_thread():
    """Backends (and the workers they start) in the module use one thread each."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CTCBENCH_THREADS", "1")
    yield
    mp.undo()


@contextlib.contextmanager
def running_backend(name: str):
    """The backend ``name`` on one thread, closed afterwards; the test skips, saying why, when
    it cannot run here."""
    mp = pytest.MonkeyPatch()
    mp.setenv("CTCBENCH_THREADS", "1")
    try:
        loaded = ctcbench.get_backend(name)
    except ctcbench.BackendUnavailable as exc:
        mp.undo()
        pytest.skip(f"needs backend {name}: {exc}")
    try:
        yield loaded
    finally:
        loaded.close()
        mp.undo()


def plugin_distribution(folder, name: str, module: str, source: str, attr: str) -> None:
    """A tiny installed distribution in ``folder`` (put it on ``sys.path``): ``module.py``
    holding ``source``, and a dist-info whose entry point registers ``module:attr`` as the
    backend ``name``."""
    (folder / f"{module}.py").write_text(textwrap.dedent(source))
    info = folder / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[ctcbench.backends]\n{name} = {module}:{attr}\n")
