"""benchmarks/gpu_check.py: its plan names every step of the GPU check and fits the ~8
minutes of the GPU machine (checked with --dry-run, which runs nothing)."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "benchmarks" / "gpu_check.py"
STEPS = ["install", "info", "compare", "paths", "fuzz-torch-cuda", "fuzz-torch-cudnn",
         "datasheet", "bench-float32", "bench-float64", "summary"]


def _dry_run(*args):
    done = subprocess.run([sys.executable, str(SCRIPT), *args, "--dry-run"], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def _plan(text):
    """{step: cap seconds} and the printed total, read off the plan table."""
    caps, total = {}, None
    for line in text.splitlines():
        parts = line.split()
        if len(parts) >= 2 and parts[1].isdigit():
            if parts[0] == "total":
                total = int(parts[1])
            else:
                caps[parts[0]] = int(parts[1])
    return caps, total


def test_dry_run_lists_every_step_within_480_s(tmp_path):
    out = tmp_path / "gpu"
    text = _dry_run(str(out))
    caps, total = _plan(text)
    assert list(caps) == STEPS
    assert total == sum(caps.values()) <= 480
    assert not out.exists()  # a dry run writes nothing
    for backend in ("numpy", "numba", "torch", "torch-cuda", "torch-cudnn", "numba-cuda"):
        assert f"--backend {backend}" in text  # compare, and bench where it applies
    assert "pip install --no-deps --no-build-isolation" in text
    assert "--stages limits,determinism" in text
    assert "--dtype float32" in text and "--dtype float64" in text


def test_no_install_and_cpu_smoke_plans(tmp_path):
    caps, total = _plan(_dry_run(str(tmp_path / "a"), "--no-install"))
    assert caps["install"] == 0 and total <= 480
    smoke = _dry_run(str(tmp_path / "b"), "--cpu-smoke", "--no-install")
    assert "torch-cuda" not in smoke and "numba-cuda" not in smoke
    caps, total = _plan(smoke)
    assert "fuzz-torch" in caps and total <= 480


def test_bench_grid_has_the_long_and_the_wide_sizes():
    sys.path.insert(0, str(SCRIPT.parent))
    try:
        import gpu_check
    finally:
        sys.path.remove(str(SCRIPT.parent))
    sizes = set(gpu_check.BENCH_SIZES)
    assert {(1000, 32, 100, 200), (200, 16, 50, 40), (50, 8, 20, 10), (1000, 8, 5000, 100)} <= sizes
    assert any(T == 4000 and L == 1000 for T, _, _, L in sizes)
    assert any(C == 5000 for _, _, C, _ in sizes)


def test_paths_step_judges_as_compare_does():
    """The paths step's verdict on one result: the reference itself is ok with the same
    bits twice, a loss 0.5 high is a mismatch naming the loss, both against the reference."""
    import importlib.util
    from types import SimpleNamespace

    import numpy as np

    import ctcbench
    from ctcbench.caselib.judge import problem_tolerance
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    rng = np.random.default_rng(0)
    problem = ctcbench.CTCProblem(rng.normal(size=(6, 2, 4)), np.array([[1, 2], [3, 3]]),
                                  np.array([6, 5]), np.array([2, 2]))
    reference = ctcbench.get_backend("numpy")
    want = reference.run(problem)
    tol = problem_tolerance(problem)
    ok = gpu_check._checked(reference, problem, want, tol, np)
    assert ok["status"] == "ok" and ok["same_bits"] and ok["loss_err"] == 0

    class High:
        def run(self, p):
            r = reference.run(p)
            return SimpleNamespace(loss=r.loss + 0.5, grad_logits=r.grad_logits, notes=[],
                                   compute_dtype=None)
    bad = gpu_check._checked(High(), problem, want, tol, np)
    assert bad["status"] == "mismatch" and bad["loss_err"] == 0.5 and "loss vs numpy" in bad["reason"]
