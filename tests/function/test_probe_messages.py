"""The probe of a ``--function``: each way a function answers in another form than its
convention's is said as what it is, by real small functions (tests/function/wrapped), and a
dtype is named only where the dtype is what fails."""
import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.errors import InputError
from ctcbench.runtime.function_backend import FunctionBackend

WRAPPED = Path(__file__).parent / "wrapped"


@pytest.fixture(autouse=True)
def beside_the_functions(monkeypatch):
    monkeypatch.chdir(WRAPPED)
    monkeypatch.syspath_prepend(str(WRAPPED))
    monkeypatch.setenv("CTCBENCH_THREADS", "1")


# function, convention, what the message must say (each its own words)
REFUSED = [
    ("probe_mistakes:returns_loss_and_aux", None,
     "returned a tuple of 2 (shape (2,), dict): return only element 0, which has that shape"),
    ("probe_mistakes:mean_by_default", None,
     "returned a loss of shape () for N = 2 samples: it reduces the batch (a sum or a mean), "
     "pass reduction='none'"),
    ("probe_mistakes:column_of_losses", None,
     "returned a loss of shape (2, 1): drop the axis of length 1"),
    ("probe_mistakes:only_mean", None,
     "raised NotImplementedError: reduction='none'; called without the reduction='none' "
     "ctcbench passes, it returns a loss of shape () for N = 2 samples: make reduction='none' "
     "return one loss per sample"),
    ("probe_mistakes:asserts_probabilities", None,
     "raised ValueError: expected probabilities in [0, 1]; handed probabilities instead of the "
     "log-probabilities the torch convention hands over"),
    ("probe_mistakes:always_raises", None, "raised RuntimeError: kernel not built"),
    ("probe_mistakes:numpy_loss_only", "numpy",
     "returned ndarray (shape (2,)): return (loss (N,), grad (T, N, C))"),
]


@pytest.mark.parametrize("target, convention, words", REFUSED, ids=[r[0] for r in REFUSED])
def test_the_probe_says_what_the_function_returned(target, convention, words):
    """In the worker's own code path (prepare), in this process."""
    with pytest.raises(InputError) as info:
        FunctionBackend(target, convention=convention).prepare()
    message = str(info.value)
    assert message.startswith("--function: expected a CTC function") and words in message, message
    assert not any(d in message for d in ("float16", "bfloat16", "float32", "float64")), message


def test_a_dtype_is_named_where_each_dtype_fails_in_its_own_words():
    with pytest.raises(InputError) as info:
        FunctionBackend("probe_mistakes:int8_only").prepare()
    message = str(info.value)
    for dtype in ("float16", "bfloat16", "float32", "float64"):
        assert f"in {dtype}: TypeError: torch.{dtype} is not supported" in message, message


@pytest.mark.parametrize("target, convention, words", [
    ("probe_mistakes:takes_probabilities", None,
     "warning: its losses on the two-frame probe are NaN (want [1.0338, 1.5872]): does it "
     "take the log of its input? The torch convention hands it log-probs"),
    ("probe_mistakes:numpy_logits_as_log_probs", "numpy",
     "warning: its losses on the two-frame probe, [-1.4156, -0.9679], are those of the logits "
     "taken as log-probabilities (want [1.0338, 1.5872], after log_softmax)"),
])
def test_scores_read_in_another_convention_are_a_warning_on_the_first_line(target, convention,
                                                                            words):
    """The losses wanted are the two-frame problem's by hand: -log of the three paths' mass,
    after log_softmax (1.0338, 1.5872) and on the raw logits (-1.4156, -0.9679)."""
    backend = FunctionBackend(target, convention=convention)
    backend.prepare()
    assert words in backend.notes[0], backend.notes[0]


def test_a_correct_function_gets_no_warning():
    backend = FunctionBackend("torch_wrappers:ctc_loss")
    backend.prepare()
    assert "warning" not in backend.notes[0]
    assert "targets padded and concatenated" in backend.notes[0]


needs_jax = pytest.mark.skipif(importlib.util.find_spec("optax") is None,
                               reason="needs jax and optax (pip install 'ctcbench[jax]')")


@needs_jax
@pytest.mark.parametrize("target, words", [
    ("jax_mistakes:ctc_loss_with_aux",
     "--function: expected a CTC function in the optax convention that returns one loss per "
     "sample, got jax_mistakes:ctc_loss_with_aux returned a tuple of 2 (shape (2,), dict): "
     "return only element 0"),
    ("jax_mistakes:ctc_loss_of_log_probs",
     "raised ValueError: logits: expected log-probabilities (<= 0); handed log-probabilities "
     "instead of the unnormalised logits the optax convention hands over"),
])
def test_a_jax_function_is_told_on_the_command_line_in_one_line(tmp_path, target, words):
    """Through the CLI and the worker (JAX stays out of this process)."""
    res = CliRunner().invoke(cli, ["compare", "--function", target, "--case", "toy_alpha_beta",
                                   "--no-plot", "--out", str(tmp_path / "run")])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    line = res.output.strip().splitlines()[-1]
    assert line.startswith("Error: ") and words in line, line
    assert not (tmp_path / "run").exists()
