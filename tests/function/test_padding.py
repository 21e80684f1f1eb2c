"""A ``--function`` sees each case as it is written: NaN and 1e30 in padded frames, -inf
logits, int32 targets, concatenated targets. A function whose valid-frame gradients change
with the padding fails the padded-frame cases; torch's kernel and a correct NumPy CTC pass
them. The oracles are the case library's known answers (brute force, TF's published values)
and torch's own kernel; a built-in adapter that clears padded frames says so in its rows."""
import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.core.oracles import brute_force
from ctcbench.runtime.registry import unregister_backend

WRAPPED = Path(__file__).parent / "wrapped"
PADDING = ("nan_in_padded_frames", "tf_basic")  # NaN in padded frames (and 1e30, -1e30)


@pytest.fixture(autouse=True)
def beside_the_functions(monkeypatch):
    monkeypatch.chdir(WRAPPED)
    monkeypatch.syspath_prepend(str(WRAPPED))
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    yield
    for name in ("padding_ctc:ctc_loss", "padding_ctc:ctc_loss_masks_by_multiplying",
                 "torch_wrappers:ctc_loss", "torch_wrappers:ctc_loss_recording"):
        try:
            unregister_backend(name)
        except KeyError:
            pass


def compare(tmp_path, *args, cases=PADDING, dtypes=("float32", "float64")):
    words = [w for c in cases for w in ("--case", c)] + [w for d in dtypes for w in ("--dtype", d)]
    res = CliRunner().invoke(cli, ["compare", *args, *words, "--no-plot", "--format", "json",
                                   "--out", str(tmp_path / "run")])
    assert "Traceback" not in res.output, res.output
    return res, json.loads(res.stdout)["rows"] if res.stdout.lstrip().startswith("{") else []


def test_the_planted_bug_makes_valid_frame_gradients_nan_only_with_nan_padding():
    """The implementation itself, against brute force: right with zero padding, NaN in every
    valid frame's gradient once a padded frame holds NaN (what the cases must catch)."""
    import padding_ctc
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(5, 1, 3))  # (T, N, C), 3 valid frames then 2 padded
    logits[3:] = 0.0
    args = (np.array([[1, 2]]), np.array([3]), np.array([2]))
    want, want_grad = brute_force(logits[:3, 0], [1, 2])
    loss, grad = padding_ctc.ctc_loss_masks_by_multiplying(logits, *args)
    assert np.isclose(loss[0], want) and np.allclose(grad[:3, 0], want_grad)
    logits[3:] = np.nan
    loss, grad = padding_ctc.ctc_loss_masks_by_multiplying(logits, *args)
    assert np.isclose(loss[0], want) and np.isnan(grad[:3, 0]).all()
    loss, grad = padding_ctc.ctc_loss(logits, *args)
    assert np.isclose(loss[0], want) and np.allclose(grad[:3, 0], want_grad)
    assert (grad[3:] == 0).all()


def test_a_function_whose_gradient_changes_with_the_padding_fails_the_padding_cases(tmp_path):
    res, rows = compare(tmp_path, "--function", "padding_ctc:ctc_loss_masks_by_multiplying",
                        "--convention", "numpy", cases=(*PADDING, "ragged_batch"))
    assert res.exit_code == 1, res.output
    status = {(r["case"], r["dtype"]): r for r in rows
              if r["backend"] == "padding_ctc:ctc_loss_masks_by_multiplying"}
    for case in PADDING:
        for dtype in ("float32", "float64"):
            row = status[case, dtype]
            assert row["status"] == "mismatch" and "err nan" in row["reason"], row
    # zeros in the padding: the same function is right
    assert {status["ragged_batch", d]["status"] for d in ("float32", "float64")} == {"ok"}


@pytest.mark.parametrize("target, convention", [("padding_ctc:ctc_loss", "numpy"),
                                                ("torch_wrappers:ctc_loss", None)])
def test_a_correct_function_and_torchs_kernel_pass_the_padding_cases(tmp_path, target,
                                                                     convention):
    extra = ["--convention", convention] if convention else []
    res, rows = compare(tmp_path, "--function", target, *extra)
    assert res.exit_code == 0, res.output
    mine = [r for r in rows if r["backend"] == target]
    assert {(r["case"], r["dtype"]) for r in mine if r["status"] == "ok"} == {
        (c, d) for c in PADDING for d in ("float32", "float64")}


def test_the_case_reaches_a_torch_function_as_it_is_written(tmp_path, monkeypatch):
    """What the function was handed, recorded by the function itself in its worker: the
    cases hold int32 and int64 targets, padded and concatenated, NaN in padded frames and
    -inf logits (cases/invariance.toml, cases/alignment.toml)."""
    record = tmp_path / "record.jsonl"
    monkeypatch.setenv("CTCBENCH_RECORD", str(record))
    res, rows = compare(tmp_path, "--function", "torch_wrappers:ctc_loss_recording",
                        cases=("int32_vs_int64", "padded_vs_concatenated", "nan_in_padded_frames",
                               "masked_classes"), dtypes=("float64",))
    seen = [json.loads(line) for line in record.read_text().splitlines()]
    assert {s["targets_dtype"] for s in seen} >= {"torch.int32", "torch.int64"}
    assert {s["lengths_dtype"] for s in seen} >= {"torch.int32", "torch.int64"}
    assert {s["targets_ndim"] for s in seen} == {1, 2}  # concatenated and padded
    assert any(s["nan_in_padding"] for s in seen) and any(s["neg_inf"] for s in seen)


@pytest.mark.skipif(importlib.util.find_spec("optax") is None,
                    reason="needs jax and optax (pip install 'ctcbench[jax]')")
def test_a_built_in_adapter_that_clears_padded_frames_says_so_in_the_row(tmp_path):
    """optax's adapter gives optax logit 0 on padded frames (its clears_padded_frames trait);
    torch's hands the frames on as they are."""
    res, rows = compare(tmp_path, "--backend", "optax", "--backend", "torch",
                        cases=("nan_in_padded_frames", "toy_alpha_beta"), dtypes=("float64",))
    reasons = {(r["backend"], r["case"]): r["reason"] or "" for r in rows}
    note = "optax's adapter hands its framework logit 0 on padded frames"
    assert note in reasons["optax", "nan_in_padded_frames"]
    assert "adapter hands" not in reasons["torch", "nan_in_padded_frames"]
    assert "adapter hands" not in reasons["optax", "toy_alpha_beta"]  # no padded frame there
