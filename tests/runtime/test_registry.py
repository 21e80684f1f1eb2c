"""The backend registry: built-ins, entry-point plugins, lazy imports, clear errors."""
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import ctcbench
from ctcbench import BackendUnavailable, CTCProblem, get_backend, list_backends
from ctcbench.core import oracles
from ctcbench.runtime.protocol import as_result


def test_builtins_are_listed():
    """numpy and torch run everywhere; the CUDA ones are always registered."""
    infos = {i.name: i for i in list_backends()}
    assert {"numpy", "torch", "torch-cuda", "torch-cudnn"} <= set(infos)
    assert infos["numpy"].available and infos["torch"].available


def test_unknown_name_lists_known_ones():
    """One plain error naming the known backends."""
    with pytest.raises(KeyError, match="backend: expected one of .*numpy.*torch.*, got 'nope'$"):
        get_backend("nope")


def test_entry_point_plugin_is_found_and_run(installed_plugin):
    """A third party registers through the entry-point group and runs like a built-in."""
    infos = {i.name: i for i in list_backends()}
    assert infos["toy"].available and infos["toy"].source == "plugin"
    assert not infos["toy-gpu"].available
    assert infos["toy-gpu"].reason == "no accelerator here" and infos["toy-gpu"].hint == "pip install toy-gpu"
    problem = CTCProblem(np.zeros((7, 1, 3)), np.array([[1, 2]]), [7], [2])
    result = get_backend("toy").run(problem)
    assert result.loss.dtype == np.float64 and result.grad_logits.shape == (7, 1, 3)
    # The toy is wrong, and the oracle says so: uniform loss is T log C - log binom(...).
    assert result.loss[0] != pytest.approx(oracles.uniform_loss(7, 3, [1, 2]))


def test_register_in_process_and_refuse_duplicates():
    """register_backend() adds a backend through the same table; an existing name needs replace."""
    with pytest.raises(ValueError, match="already registered"):
        ctcbench.register_backend("numpy", object)
    ctcbench.register_backend("numpy-again", "ctcbench.backends.numpy_ref:NumpyBackend")
    try:
        assert get_backend("numpy-again").run(
            CTCProblem(np.zeros((3, 1, 2)), np.array([[1]]), [3], [1])).loss[0] == pytest.approx(
            oracles.uniform_loss(3, 2, [1]))
    finally:
        ctcbench.unregister_backend("numpy-again")


def test_result_that_breaks_the_contract_is_reported():
    """A result with the wrong shape or no gradient is a clear error, not silent garbage."""
    problem = CTCProblem(np.zeros((3, 2, 2)), np.array([[1], [1]]), [3, 3], [1, 1])

    class NoGrad:
        loss = np.zeros(2)

    class WrongShape:
        loss = np.zeros(3)
        grad_logits = np.zeros((3, 2, 2))
    with pytest.raises(TypeError, match="without .grad_logits"):
        as_result(NoGrad(), problem)
    with pytest.raises(ValueError, match=r"expected shape \(2,\), got \(3,\)"):
        as_result(WrongShape(), problem)


def test_broken_plugin_does_not_hide_the_others(register_backends):
    """A plugin that fails to import is listed as unavailable with the reason."""
    register_backends("broken", "no_such_module_xyz:Backend")
    infos = {i.name: i for i in list_backends()}
    assert not infos["broken"].available and "no_such_module_xyz" in infos["broken"].reason
    assert infos["numpy"].available
    with pytest.raises(BackendUnavailable):
        get_backend("broken")


def test_imports_are_lazy():
    """Importing ctcbench and running `ctcbench --help` and `backends` imports no torch until asked."""
    code = textwrap.dedent("""
        import sys
        from click.testing import CliRunner
        import ctcbench
        from ctcbench.cli import cli
        assert CliRunner().invoke(cli, ["--help"]).exit_code == 0
        print("torch" in sys.modules, "jax" in sys.modules, "tensorflow" in sys.modules)
    """)
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["False", "False", "False"]


class KeepsWeights:
    """Records the upstream weights it is handed."""

    seen = None

    def run(self, problem, *, grad_weights=None):
        KeepsWeights.seen = grad_weights
        return get_backend("numpy").run(problem, grad_weights=grad_weights)


@pytest.mark.parametrize("weights, got", [
    ([1.0, 2.0], "got shape (2,)"),
    ([[1.0, 2.0, 3.0]], "got shape (1, 3)"),
    (["a", "b", "c"], "got shape (3,) of str"),
    ([1.0, [2.0], 3.0], "got list"),
])
@pytest.mark.parametrize("name", ["numpy", "torch", "keeps-weights"])
def test_grad_weights_of_the_wrong_shape_or_type_say_so(register_backends, name, weights, got):
    """Upstream weights must be (N,) real numbers, checked once for every backend with one
    message, before the backend sees them."""
    register_backends("keeps-weights", KeepsWeights)
    problem = CTCProblem(np.zeros((4, 3, 5)), [[1], [2], [3]], [4, 4, 4], [1, 1, 1])
    with pytest.raises(ValueError,
                       match=r"grad_weights: expected shape \(3,\) real numbers") as info:
        get_backend(name).run(problem, grad_weights=weights)
    assert got in str(info.value)
    KeepsWeights.seen = None
    get_backend(name).run(problem, grad_weights=[1, 2, 3])
    if name == "keeps-weights":
        assert KeepsWeights.seen.dtype == np.float64 and KeepsWeights.seen.tolist() == [1, 2, 3]
