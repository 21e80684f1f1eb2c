"""Worker-process isolation: crashes and hangs cost one case, answers stay exact."""
from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from conftest import check_against_brute_force, random_problem, registered_for_one_test
from ctcbench import (
    BackendCrashed,
    BackendTimeout,
    BackendUnavailable,
    CTCProblem,
    UnsupportedProblem,
    get_backend,
    register_backend,
    unregister_backend,
)
from ctcbench.core import oracles
from ctcbench.cli import cli
from ctcbench.runtime.worker import IsolatedBackend, WorkerError

PLUGINS = {
    "segv-on-blank1": "misbehaving_backends:SegfaultOnBlankOne",
    "abort-on-blank1": "misbehaving_backends:AbortOnBlankOne",
    "hang-on-blank1": "misbehaving_backends:HangOnBlankOne",
    "exit-on-blank1": "misbehaving_backends:ExitOnBlankOne",
    "segv-always": "misbehaving_backends:SegfaultAlways",
    "missing-package": "misbehaving_backends:NeedsMissingPackage",
    "prints": "misbehaving_backends:PrintsToStdout",
    "segv-known": "misbehaving_backends:SegfaultAlwaysKnownOnTfBasic",
    "raises": "misbehaving_backends:RaisesOnRequest",
    "segv-third-call": "misbehaving_backends:SegfaultOnThirdCall",
}


@pytest.fixture(autouse=True)
def plugins(monkeypatch, register_backends):
    yield from registered_for_one_test(monkeypatch, register_backends, PLUGINS)


def _problems(rng):
    fine = random_problem(rng, T=5, N=3, C=3, L=2, blank=0)
    fatal = random_problem(rng, T=5, N=3, C=3, L=2, blank=1)
    return fine, fatal


@pytest.mark.parametrize("name, signal_name", [("segv-on-blank1", "SIGSEGV"),
                                               ("abort-on-blank1", "SIGABRT")])
def test_crash_is_reported_with_signal_and_worker_restarts(rng, name, signal_name):
    """A segfault or abort raises BackendCrashed naming the signal; the next case runs in a new worker."""
    fine, fatal = _problems(rng)
    backend = get_backend(name)
    assert isinstance(backend.worker, IsolatedBackend)
    check_against_brute_force(fine, backend.run(fine))
    first_pid = backend.worker_pid
    with pytest.raises(BackendCrashed) as info:
        backend.run(fatal)
    assert info.value.signal == signal_name and info.value.status == "crashed"
    assert signal_name in str(info.value) and name in str(info.value)
    assert backend.worker_pid is None
    check_against_brute_force(fine, backend.run(fine))  # restarted, still exact
    assert backend.worker_pid not in (None, first_pid)


def test_faulthandler_report_is_quoted(rng):
    """The crash message carries the faulthandler line from the worker's stderr."""
    _, fatal = _problems(rng)
    with pytest.raises(BackendCrashed, match="Fatal Python error: Segmentation fault"):
        get_backend("segv-on-blank1").run(fatal)


def test_exit_without_signal_reports_exit_code(rng):
    """A worker that exits on its own is 'crashed' with its exit code, not a signal."""
    _, fatal = _problems(rng)
    with pytest.raises(BackendCrashed, match="exit code 3") as info:
        get_backend("exit-on-blank1").run(fatal)
    assert info.value.signal is None and info.value.exitcode == 3


def test_hang_times_out_and_worker_restarts(rng):
    """A worker that does not answer within timeout_s is killed; the run goes on."""
    fine, fatal = _problems(rng)
    backend = get_backend("hang-on-blank1")
    assert backend.traits.timeout_s == 3.0  # taken from the plugin's class attribute
    with pytest.raises(BackendTimeout, match="did not answer within 3 s") as info:
        backend.run(fatal)
    assert info.value.status == "timeout" and info.value.timeout_s == 3.0
    check_against_brute_force(fine, backend.run(fine))


@pytest.mark.long
def test_a_call_s_own_timeout_overrides_the_trait_for_that_call_only(rng):
    """run(timeout_s=1) gives up after 1 s, not the trait's 3; the next call has the trait."""
    fine, fatal = _problems(rng)
    backend = get_backend("hang-on-blank1")
    with pytest.raises(BackendTimeout, match="did not answer within 1 s") as info:
        backend.run(fatal, timeout_s=1)
    assert info.value.timeout_s == 1
    check_against_brute_force(fine, backend.run(fine, timeout_s=30))
    with pytest.raises(BackendTimeout, match="within 3 s"):
        backend.run(fatal)
    with pytest.raises(ValueError, match="timeout_s: expected a positive finite number"):
        backend.run(fine, timeout_s=0)


def test_worker_is_reused_across_cases(rng):
    """One long-lived worker per backend: asking again does not start another process."""
    fine, _ = _problems(rng)
    first = get_backend("segv-on-blank1")
    first.run(fine)
    pid = first.worker_pid
    again = get_backend("segv-on-blank1")
    check_against_brute_force(fine, again.run(fine))
    assert again.worker_pid == pid


def test_any_backend_can_be_isolated_or_kept_in_process(rng):
    """isolated=True runs the numpy reference in a worker; isolated=False keeps a plugin in-process."""
    problem = random_problem(rng, T=6, N=4, C=3, L=3, blank=2)
    isolated = get_backend("numpy", isolated=True)
    assert isinstance(isolated.worker, IsolatedBackend) and isolated.isolated
    check_against_brute_force(problem, isolated.run(problem))
    assert isolated.run(problem).compute_dtype == "float64"
    in_process = get_backend("segv-on-blank1", isolated=False)
    assert in_process.worker is None and not in_process.isolated
    check_against_brute_force(problem.with_logits(problem.logits), in_process.run(problem))


def test_problem_details_survive_the_trip(rng):
    """float32 logits, NaN padding, int32 concatenated targets and grad_weights reach the worker intact."""
    base = random_problem(rng, T=5, N=3, C=3, L=2, dtype=np.float32)
    problem = CTCProblem(base.logits, base.concatenated_targets().astype(np.int32),
                         base.input_lengths, base.target_lengths, blank=0)
    weights = np.array([2.0, -0.5, 0.0])
    got = get_backend("numpy", isolated=True).run(problem, grad_weights=weights)
    want = get_backend("numpy").run(problem, grad_weights=weights)
    np.testing.assert_array_equal(got.loss, want.loss)
    np.testing.assert_array_equal(got.grad_logits, want.grad_logits)
    for n in range(3):  # and the scaling is right: weights times the brute-force gradient
        T_n = problem.input_lengths[n]
        _, grad = oracles.brute_force(problem.logits[:T_n, n].astype(np.float64),
                                      problem.targets[n, : problem.target_lengths[n]])
        np.testing.assert_allclose(got.grad_logits[:T_n, n], weights[n] * grad, atol=1e-9)


def test_backend_exceptions_come_back_as_themselves(rng):
    """UnsupportedProblem and ValueError raised in the worker are re-raised as such, worker alive."""
    backend = get_backend("raises")
    with pytest.raises(UnsupportedProblem, match="not float16"):
        backend.run(random_problem(rng, T=4, N=2, C=3, L=1, dtype=np.float16))
    pid = backend.worker_pid
    with pytest.raises(ValueError, match="blank: expected 0, got 1"):
        backend.run(random_problem(rng, T=4, N=2, C=3, L=1, blank=1))
    with pytest.raises(WorkerError, match="raised ZeroDivisionError") as info:
        backend.run(random_problem(rng, T=4, N=2, C=3, L=1, blank=2))
    assert "1 / 0" in info.value.remote_traceback
    assert backend.worker_pid == pid  # an exception is not a crash: same worker
    with pytest.raises(UnsupportedProblem, match="takes no grad_weights"):
        get_backend("segv-always").run(random_problem(rng, T=4, N=2, C=3, L=1),
                                       grad_weights=np.ones(2))


def test_unavailable_plugin_is_unavailable_without_starting_a_worker():
    """The availability check runs in this process; the install hint comes through."""
    with pytest.raises(BackendUnavailable, match="not-a-real-ctc-package") as info:
        get_backend("missing-package")
    assert info.value.hint == "pip install not-a-real-ctc-package"


def test_stray_stdout_does_not_corrupt_the_protocol(rng):
    """A backend that prints to stdout (as frameworks do) still returns exact answers."""
    problem = random_problem(rng, T=5, N=2, C=3, L=2)
    check_against_brute_force(problem, get_backend("prints").run(problem))


def test_unimportable_factory_is_refused_for_isolation():
    """A lambda cannot be rebuilt in a worker: a clear error instead of a broken worker."""
    from ctcbench.backends.numpy_ref import NumpyBackend
    register_backend("lambda-backend", lambda: NumpyBackend())
    try:
        with pytest.raises(ValueError, match="importable module-level class"):
            get_backend("lambda-backend", isolated=True)
    finally:
        unregister_backend("lambda-backend")


def test_compare_records_crash_and_keeps_other_rows(tmp_path):
    """`ctcbench compare` with a plugin that always segfaults: its rows are 'crashed', numpy's complete."""
    out = tmp_path / "run"
    cases = ["tf_basic", "single_alignment_repeats", "empty_target"]
    args = ["compare", "--backend", "numpy", "--backend", "segv-always", "--dtype", "float64",
            "--format", "json", "--out", str(out), "--no-plot"]
    for c in cases:
        args += ["--case", c]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 1, result.output[-2000:]  # a crash fails the gate
    rows = json.loads(result.stdout)["rows"]
    crashed = [r for r in rows if r["backend"] == "segv-always"]
    assert len(crashed) == len(cases)
    assert all(r["status"] == "crashed" and "SIGSEGV" in r["reason"] for r in crashed)
    numpy_rows = [r for r in rows if r["backend"] == "numpy"]
    assert sorted(r["case"] for r in numpy_rows) == sorted(cases)
    assert all(r["status"] == "ok" for r in numpy_rows)
    logged = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert sum(r["status"] == "crashed" for r in logged) == len(cases)


def test_known_issue_is_recorded_but_does_not_fail_the_gate(tmp_path):
    """A crash the backend lists in known_issues is status 'known' with its signal; others still fail."""
    def run(*cases):
        args = ["compare", "--backend", "segv-known", "--dtype", "float64", "--format", "json",
                "--out", str(tmp_path / "-".join(cases)), "--no-plot"]
        for c in cases:
            args += ["--case", c]
        return CliRunner().invoke(cli, args)
    known = run("tf_basic")
    assert known.exit_code == 0, known.output[-2000:]
    (row,) = json.loads(known.stdout)["rows"]
    assert row["status"] == "known"
    assert row["reason"].startswith("known crashed: segfaults on the TensorFlow testBasic tables")
    assert "SIGSEGV" in row["reason"]
    both = run("tf_basic", "toy_alpha_beta")
    assert both.exit_code == 1
    statuses = {r["case"]: r["status"] for r in json.loads(both.stdout)["rows"]}
    assert statuses == {"tf_basic": "known", "toy_alpha_beta": "crashed"}


def test_bench_records_a_worker_that_dies_while_timed_and_goes_on(tmp_path, tiny_grid):
    """A plugin whose worker segfaults after warm-up gets a crashed row; torch is still timed,
    and a resumed run measures the failed backend again."""
    from ctcbench.bench.run import bench, records
    run = bench(backends=["segv-third-call", "segv-always", "numpy"], grid=str(tiny_grid),
                repeat=2, out=tmp_path / "r", plot=False, progress=False)
    row = {r["backend"]: r for r in records(run.rows)}
    assert row["segv-third-call"]["status"] == "crashed"
    assert "SIGSEGV" in row["segv-third-call"]["reason"]
    assert row["segv-always"]["status"] == "crashed"
    assert row["numpy"]["status"] == row["torch"]["status"] == "ok"
    again = bench(backends=["segv-always", "numpy"], grid=str(tiny_grid), repeat=2,
                  out=tmp_path / "r", resume=True, plot=False, progress=False)
    assert again.resumed == 0  # the crashed row is not taken as done


def test_the_worker_itself_refuses_weights_its_backend_cannot_take(rng):
    """IsolatedBackend used directly: grad_weights for a run() without them is UnsupportedProblem
    from the worker, which lives on and answers exactly."""
    worker = IsolatedBackend("prints-direct", "misbehaving_backends:PrintsToStdout")
    problem = random_problem(rng, T=5, N=2, C=3, L=2)
    try:
        with pytest.raises(UnsupportedProblem,
                           match=r"^prints-direct: run\(\) takes no grad_weights"):
            worker.run(problem, grad_weights=np.ones(2))
        pid = worker.worker_pid
        check_against_brute_force(problem, worker.run(problem))
        assert worker.worker_pid == pid
    finally:
        worker.close()
