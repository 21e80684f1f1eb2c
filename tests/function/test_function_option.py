"""``ctcbench compare --function``: a user's CTC function as a backend, and every mistake in
the option as one line. The oracles are the case library's known answers (brute force,
published values) that compare checks against."""
import importlib.util
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.runtime.registry import unregister_backend

IMPLEMENTATIONS = Path(__file__).parent.parent / "implementations"
# a few cases of each kind: published values, repeats (where the planted bug shows), blanks
CASES = ("tf_basic", "toy_alpha_beta", "repeat_perfect_vs_blank", "single_alignment_repeats",
         "blank_first_vs_last", "empty_target", "infeasible_target", "ragged_batch")


@pytest.fixture
def in_implementations(monkeypatch):
    """Run in tests/implementations, the way a user runs ctcbench beside their module."""
    monkeypatch.chdir(IMPLEMENTATIONS)
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    yield IMPLEMENTATIONS

needs_jax = pytest.mark.skipif(importlib.util.find_spec("jax") is None,
                               reason="needs jax (pip install 'ctcbench[jax]')")


def compare(tmp_path, *args):
    case_args = [a for c in CASES for a in ("--case", c)]
    res = CliRunner().invoke(cli, ["compare", *args, *case_args, "--dtype", "float64",
                                   "--no-plot", "--out", str(tmp_path / "run"),
                                   "--format", "json"])
    return res


def rows_of(res, name):
    return [r for r in json.loads(res.stdout)["rows"] if r["backend"] == name]


@pytest.fixture(autouse=True)
def forget_functions():
    yield
    for name in ("torch_ctc:ctc_loss", "torch_ctc:ctc_loss_skips_repeats", "numpy_ctc:ctc_loss",
                 "numpy_ctc:ctc_loss_skips_repeats", "jax_ctc:ctc_loss",
                 "jax_ctc:ctc_loss_skips_repeats", "bad_functions:wrong_shape",
                 "keras_ctc:ctc_loss"):
        try:
            unregister_backend(name)
        except KeyError:
            pass


@pytest.mark.parametrize("module, convention", [
    ("torch_ctc", None), ("numpy_ctc", "numpy"),
    pytest.param("jax_ctc", None, marks=[needs_jax, pytest.mark.long])])
def test_a_correct_function_passes_and_its_planted_bug_fails_on_repeats(
        tmp_path, in_implementations, module, convention):
    extra = ["--convention", convention] if convention else []
    good = compare(tmp_path / "good", "--function", f"{module}:ctc_loss", *extra)
    assert good.exit_code == 0, good.output
    rows = rows_of(good, f"{module}:ctc_loss")
    assert {r["case"] for r in rows} == set(CASES) and all(r["status"] == "ok" for r in rows)
    bad = compare(tmp_path / "bad", "--function", f"{module}:ctc_loss_skips_repeats", *extra)
    assert bad.exit_code == 1
    failed = {r["case"] for r in rows_of(bad, f"{module}:ctc_loss_skips_repeats")
              if r["status"] == "mismatch"}
    # the bug lets "aa" be read as "a": only targets with a repeated label can show it
    assert {"repeat_perfect_vs_blank", "single_alignment_repeats"} <= failed
    assert "toy_alpha_beta" not in failed and "empty_target" not in failed


def one_line_error(tmp_path, *args):
    res = CliRunner().invoke(cli, ["compare", *args, "--case", "toy_alpha_beta", "--no-plot",
                                   "--out", str(tmp_path / "run")])
    lines = res.output.strip().splitlines()
    assert res.exit_code in (1, 2) and "Traceback" not in res.output, res.output
    assert not (tmp_path / "run").exists()
    return lines[-1]


@pytest.mark.parametrize("target, words", [
    ("torch_ctc", "PKG.MOD:NAME"),
    ("no_such_module:ctc", "no module 'no_such_module'"),
    ("torch_ctc:no_such_name", "a name 'no_such_name' in torch_ctc"),
    ("torch_ctc:NEG", "a callable CTC function"),
    ("bad_functions:two_params", "--convention: expected one of torch, optax, keras, numpy"),
    ("bad_functions:wrong_shape", "returned a loss of shape () for N = 2 samples"),
    ("bad_functions:raises_on_import", "a module 'bad_functions_import' that imports"),
])
def test_each_mistake_in_the_option_is_one_line_naming_it(tmp_path, in_implementations,
                                                          target, words):
    if target == "bad_functions:raises_on_import":
        target = "bad_functions_import:ctc"
    line = one_line_error(tmp_path, "--function", target)
    assert line.startswith("Error: --") and words in line, line


def test_a_missing_framework_names_the_extra(monkeypatch):
    """The framework check itself: jax hidden from the import system, in this process."""
    import importlib.util as util

    from ctcbench.runtime.function_backend import FunctionBackend
    from ctcbench.errors import InputError
    real = util.find_spec
    monkeypatch.setattr(util, "find_spec", lambda name, *a: None if name == "jax" else real(name, *a))
    backend = FunctionBackend("implementations.numpy_ctc:ctc_loss", convention="optax")
    with pytest.raises(InputError, match=r"jax missing \(pip install 'ctcbench\[jax\]'\)"):
        backend.prepare()


def test_fuzz_finds_the_planted_bug_and_its_reproduce_line_fails_it(tmp_path,
                                                                     in_implementations):
    res = CliRunner().invoke(cli, ["fuzz", "--function", "numpy_ctc:ctc_loss_skips_repeats",
                                   "--convention", "numpy", "--budget", "30", "--dtype",
                                   "float64", "--out", str(tmp_path / "fuzz")])
    assert res.exit_code == 1, res.output
    line = next(x for x in res.stdout.splitlines() if x.startswith("reproduce: "))
    words = line.removeprefix("reproduce: ctcbench ").split()
    assert words[-4:] == ["--function", "numpy_ctc:ctc_loss_skips_repeats", "--convention",
                          "numpy"]
    again = CliRunner().invoke(cli, [*words, "--out", str(tmp_path / "again"), "--no-plot"])
    assert again.exit_code == 1 and "mismatch" in again.stdout, again.output


def test_bench_times_a_function_beside_torch(tmp_path, in_implementations):
    grid = tmp_path / "grid.csv"
    grid.write_text("T,N,C,L\n20,2,5,4\n")
    res = CliRunner().invoke(cli, ["bench", "--function", "numpy_ctc:ctc_loss", "--convention",
                                   "numpy", "--grid", str(grid), "--repeat", "2", "--format",
                                   "json", "--out", str(tmp_path / "bench")])
    assert res.exit_code == 0, res.output
    rows = {r["backend"]: r for r in json.loads(res.stdout)}
    assert rows["numpy_ctc:ctc_loss"]["status"] == "ok" and rows["torch"]["status"] == "ok"
    assert rows["numpy_ctc:ctc_loss"]["time_median_s"] > 0


def test_fuzz_takes_one_backend(tmp_path):
    res = CliRunner().invoke(cli, ["fuzz", "--backend", "numpy", "--function", "a.b:c"])
    assert res.exit_code == 2 and "--backend: expected one backend" in res.output


@pytest.mark.skipif(importlib.util.find_spec("keras") is None,
                    reason="needs keras (pip install 'ctcbench[keras]')")
def test_a_keras_convention_function_is_read_off_and_checked(tmp_path, in_implementations):
    res = CliRunner().invoke(cli, ["compare", "--function", "keras_ctc:ctc_loss", "--case",
                                   "toy_alpha_beta", "--case", "blank_first_vs_last",
                                   "--dtype", "float32", "--no-plot", "--format", "json",
                                   "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert "keras_ctc:ctc_loss: keras convention (read off its parameters)" in res.output
    assert {r["status"] for r in rows_of(res, "keras_ctc:ctc_loss")} == {"ok"}


@pytest.mark.long
def test_datasheet_measures_a_function_and_finds_the_planted_bug(tmp_path, in_implementations):
    """The precision stage, against the float64 reference, finds the loss that skipping repeats
    gets wrong; the worst case is written under a file name without the ':' of the target."""
    res = CliRunner().invoke(cli, ["datasheet", "--function", "numpy_ctc:ctc_loss_skips_repeats",
                                   "--convention", "numpy", "--stages", "precision", "--dtype",
                                   "float64", "--budget", "5", "--trials", "3", "--format",
                                   "json", "--out", str(tmp_path / "sheet")])
    assert res.exit_code == 0, res.output
    sheet = json.loads(res.stdout)["backends"]["numpy_ctc:ctc_loss_skips_repeats"]
    worst = sheet["precision"]["float64"]["loss"]
    assert worst["loss_err"] > 1e-3, worst
    assert ":" not in worst["case_file"] and (tmp_path / "sheet" / worst["case_file"]).is_file()
