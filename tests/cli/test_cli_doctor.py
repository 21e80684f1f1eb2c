"""`ctcbench doctor` through the real CLI: tables, JSON, exit status, clean errors."""
from __future__ import annotations

import json
import warnings

import numpy as np
import pytest
import torch
from click.testing import CliRunner

from ctcbench.cli import cli

from conftest import random_problem, spike_paths, trained_log_probs


@pytest.fixture
def batch(rng):
    """A healthy trained-like batch as a dict of arrays."""
    p = random_problem(rng, T=50, N=6, C=10, L=5, full_length=True, garbage=False)
    return p, dict(log_probs=trained_log_probs(rng, p), targets=p.targets,
                   input_lengths=p.input_lengths, target_lengths=p.target_lengths)


def _run(*args):
    return CliRunner().invoke(cli, ["doctor", *map(str, args)])


def test_clean_file_exits_zero_with_a_table(tmp_path, batch):
    """A well-formed .npz: exit 0 and 'no problems found'."""
    np.savez(tmp_path / "ok.npz", **batch[1])
    result = _run(tmp_path / "ok.npz")
    assert result.exit_code == 0, result.output
    assert "no problems found" in result.output and "T=50 N=6 C=10" in result.output


def test_error_finding_exits_one_and_json_names_the_code(tmp_path, batch):
    """Softmax output saved as log_probs: exit 1; JSON lists probabilities-not-log first."""
    arrays = dict(batch[1], log_probs=np.exp(batch[1]["log_probs"]))
    np.savez(tmp_path / "bad.npz", **arrays)
    result = _run(tmp_path / "bad.npz", "--format", "json")
    assert result.exit_code == 1
    report = json.loads(result.output)
    assert report["ok"] is False
    assert [f["code"] for f in report["findings"]] == ["probabilities-not-log"]
    assert set(report["findings"][0]) >= {"code", "severity", "message", "evidence", "fix"}


def test_warning_fails_only_with_strict(tmp_path, batch):
    """A blank plateau is a warning: exit 0 by default, 1 with --strict."""
    p, arrays = batch
    rng = np.random.default_rng(0)
    arrays = dict(arrays, log_probs=trained_log_probs(rng, p, paths=np.zeros((50, 6), int)))
    torch.save({k: torch.tensor(np.asarray(v)) for k, v in arrays.items()},
               tmp_path / "plateau.pt")
    assert _run(tmp_path / "plateau.pt").exit_code == 0
    result = _run(tmp_path / "plateau.pt", "--strict")
    assert result.exit_code == 1 and "blank-collapse" in result.output


def test_blank_and_layout_options_override(tmp_path, batch):
    """--blank and --layout reach the diagnosis: a wrong --blank is flagged, NTC data passes
    with --layout NTC and is flagged without it."""
    p, arrays = batch
    np.savez(tmp_path / "ok.npz", **arrays)
    assert "blank-index" in _run(tmp_path / "ok.npz", "--blank", 9).output
    C = arrays["log_probs"].shape[-1]
    out_of_range = _run(tmp_path / "ok.npz", "--blank", C)  # the option, not the file, is wrong
    assert out_of_range.output.startswith(f"Error: --blank: expected an index in [-{C}, {C})")
    np.savez(tmp_path / "ntc.npz", **dict(arrays, log_probs=arrays["log_probs"].transpose(1, 0, 2)))
    assert _run(tmp_path / "ntc.npz", "--layout", "NTC").exit_code == 0
    result = _run(tmp_path / "ntc.npz")
    assert result.exit_code == 1 and "layout" in result.output


def test_explain_perfect_vs_blank_table_and_json(tmp_path, batch):
    """--explain-perfect-vs-blank on a one-hot softmax file shows the inverted row as yours."""
    p, arrays = batch
    onehot = np.eye(10)[spike_paths(p)]
    np.savez(tmp_path / "fsdl.npz", **dict(arrays, log_probs=onehot))
    result = _run(tmp_path / "fsdl.npz", "--explain-perfect-vs-blank")
    assert result.exit_code == 0, result.output
    assert "INVERTED  <- your inputs" in result.output
    data = json.loads(_run(tmp_path / "fsdl.npz", "--explain-perfect-vs-blank", "--format",
                           "json").output)
    mine = [s for s in data["scenarios"] if s["yours"]]
    assert [s["name"] for s in mine] == ["probs as log_probs"] and mine[0]["inverted"]


@pytest.mark.parametrize("setup, message", [
    (lambda d: (d / "x.npz").write_bytes(b"junk"), "x.npz: expected a NumPy .npz archive"),
    (lambda d: None, "FILE: expected an existing .npz or .pt file"),
    (lambda d: np.savez(d / "x.npz", log_probs=np.zeros((3, 2))), "missing or ambiguous"),
    (lambda d: np.savez(d / "x.npz", log_probs=np.zeros((4, 3, 5)), targets=np.ones((2, 1), int),
                        input_lengths=np.array([4, 4]), target_lengths=np.array([1, 1])),
     "log_probs: expected a batch axis of size N = 2"),
])
def test_bad_files_give_one_error_line_not_a_traceback(tmp_path, setup, message):
    """Unreadable, missing or malformed files: exit 1, 'Error: ...', no traceback."""
    setup(tmp_path)
    result = _run(tmp_path / "x.npz")
    assert result.exit_code == 1
    assert message in result.output and "Traceback" not in result.output
    assert result.output.startswith("Error: ")


def test_plot_option_writes_a_png(tmp_path, batch):
    """--plot writes a PNG of the frames next to the report."""
    np.savez(tmp_path / "ok.npz", **batch[1])
    result = _run(tmp_path / "ok.npz", "--plot", tmp_path / "frames.png")
    assert result.exit_code == 0, result.output
    assert (tmp_path / "frames.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _pt_batch(**values):
    batch = dict(targets=torch.tensor([[1, 2]]), input_lengths=torch.tensor([4]),
                 target_lengths=torch.tensor([2]))
    return dict(batch, **values)


@pytest.mark.parametrize("save, message", [
    (lambda p: p.write_text("hello\n" * 20),
     "x.pt: expected a torch.save'd dict of tensors loadable with weights_only=True"),
    (lambda p: torch.save(_pt_batch(log_probs=torch.zeros(4, 1, 3).to_sparse()), p),
     "x.pt: log_probs: expected a dense tensor, got layout sparse_coo"),
    (lambda p: torch.save(_pt_batch(log_probs=torch.zeros(4, 1, 3).to(torch.float8_e4m3fn)), p),
     "x.pt: log_probs: expected a float or integer tensor"),
    (lambda p: torch.save(_pt_batch(log_probs=[[0.0], [0.0, 0.0]]), p),
     "x.pt: log_probs: expected a tensor or a rectangular array"),
    (lambda p: torch.save(_pt_batch(log_probs=torch.zeros(4, 1, 3), blank=float("inf")), p),
     "x.pt: blank: expected one integer"),
])
def test_bad_pt_files_give_one_line_naming_file_and_key(tmp_path, save, message):
    """Text saved as .pt, sparse or float8 tensors, ragged lists, an infinite blank: exactly one
    'Error: x.pt: ...' line (no traceback, no bare message, no warning printed first)."""
    save(tmp_path / "x.pt")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a RuntimeWarning would otherwise print before the error
        result = _run(tmp_path / "x.pt")
    assert result.exit_code == 1, result.output
    assert result.output.startswith(f"Error: {message}"), result.output
    assert len(result.output.strip().splitlines()) == 1, result.output


def test_plot_into_a_missing_folder_fails_up_front_naming_the_option(tmp_path, batch):
    """--plot into a folder that does not exist: one '--plot: expected ...' line before any
    diagnosis is printed, and no traceback."""
    np.savez(tmp_path / "ok.npz", **batch[1])
    result = _run(tmp_path / "ok.npz", "--plot", tmp_path / "missing" / "frames.png")
    assert result.exit_code == 1
    assert result.output.startswith("Error: --plot: expected"), result.output
    assert "does not exist" in result.output and "ctcbench doctor:" not in result.output


def test_plot_inside_a_file_says_it_is_a_file(tmp_path, batch):
    """--plot whose folder is a file: the error says so, not that it does not exist."""
    np.savez(tmp_path / "ok.npz", **batch[1])
    (tmp_path / "notes.txt").write_text("a file\n")
    result = _run(tmp_path / "ok.npz", "--plot", tmp_path / "notes.txt" / "frames.png")
    assert result.exit_code == 1
    assert result.output.strip() == (
        f"Error: --plot: expected a PNG path in an existing, writable folder, got "
        f"{str(tmp_path / 'notes.txt' / 'frames.png')!r} ({tmp_path / 'notes.txt'} is a file, "
        f"not a folder)")


def test_max_bytes_refuses_a_big_file_in_one_line_and_raising_it_reads_it(tmp_path, batch):
    """A healthy file over --max-bytes: one 'Error: ...' line naming the member, its size and
    the limit; with the limit raised past it the same file is diagnosed."""
    np.savez(tmp_path / "ok.npz", **batch[1])
    result = _run(tmp_path / "ok.npz", "--max-bytes", 1000)
    assert result.exit_code == 1
    assert result.output.startswith("Error: ok.npz: log_probs.npy: expected at most 1000 bytes")
    assert "(raise it with max_bytes= or --max-bytes), got a member that holds" in result.output
    assert len(result.output.strip().splitlines()) == 1, result.output
    assert _run(tmp_path / "ok.npz", "--max-bytes", 10 ** 6).exit_code == 0


def test_device_cuda_says_which_torch_path_and_how_to_take_the_other(tmp_path, batch):
    """--device cuda on padded int64 targets: native, with the failing conditions and their
    fixes in the table and under 'torch_path' in JSON; no GPU needed."""
    np.savez(tmp_path / "ok.npz", **batch[1])
    result = _run(tmp_path / "ok.npz", "--device", "cuda")
    assert result.exit_code == 0, result.output
    assert "torch path on cuda: torch's native CUDA kernel" in result.output
    assert "FAIL targets dtype: needs int32, has int64  -> targets.int()" in result.output
    data = json.loads(_run(tmp_path / "ok.npz", "--device", "cuda", "--format", "json").output)
    assert data["torch_path"]["path"] == "native" and data["findings"] == []
    result = _run(tmp_path / "ok.npz", "--device", "cuda", "--explain-perfect-vs-blank")
    assert result.exit_code == 2 and "--device: expected a diagnosis" in result.output


@pytest.mark.parametrize("args, message", [
    (["--beam", "3"], "--beam: expected --decoder with it, got none"),
    (["--alphabet", "ab", "--beam", "2"], "--beam: expected --decoder with it, got none"),
    (["--decoder", "m:f", "--explain-perfect-vs-blank"],
     "--explain-perfect-vs-blank: expected a diagnosis of the loss's inputs, got --decoder"),
    (["--decoder", "m:f", "--plot", "p.png", "--html", "p.html"],
     "--html: expected a diagnosis of the loss's inputs, got --decoder"),
    (["--decoder", "m:f", "--plot", "p.png"],
     "--plot: expected a diagnosis of the loss's inputs, got --decoder"),
    (["--explain-perfect-vs-blank", "--device", "cuda", "--html", "p.html"],
     "--html: expected a diagnosis, got --explain-perfect-vs-blank"),
    (["--layout", "ntc"], "--layout: expected one of TNC, NTC, got 'ntc'"),
    (["--reduction", "men"], "--reduction: expected one of none, sum, mean, got 'men' "
                             "(did you mean 'mean'?)"),
    (["--device", "gpu"], "--device: expected one of cpu, cuda, got 'gpu' (did you mean 'cpu'?)"),
    (["--max-bytes", "0"], "--max-bytes: expected a whole number >= 1, got '0'"),
    (["--beam", "0", "--decoder", "m:f"], "--beam: expected a whole number >= 1, got '0'"),
])
def test_options_that_do_not_go_together_are_a_usage_error(tmp_path, monkeypatch, batch, args,
                                                           message):
    """Options without the mode they need, or with one they exclude, and values out of their
    choices: exit 2 with one 'Error: --OPTION: ...' line, before FILE is read or a file
    written."""
    monkeypatch.chdir(tmp_path)
    np.savez("ok.npz", **batch[1])
    result = _run("ok.npz", *args)
    assert result.exit_code == 2, result.output
    assert result.output.strip().splitlines()[-1] == f"Error: {message}", result.output
    assert not list(tmp_path.glob("p.*"))


def test_flags_have_no_negative_form(tmp_path, batch):
    """--strict and --explain-perfect-vs-blank are bare flags, as they always were."""
    np.savez(tmp_path / "ok.npz", **batch[1])
    for flag in ("--no-strict", "--no-explain-perfect-vs-blank"):
        result = _run(tmp_path / "ok.npz", flag)
        assert result.exit_code == 2 and f"No such option '{flag}'" in result.output


def test_the_command_and_the_library_share_their_defaults(tmp_path, batch):
    """`doctor FILE` with no option and ``examine(FILE)`` report the same: one set of defaults
    (layout, reduction, blank from the file, the size limit)."""
    from ctcbench.doctor.examine import examine
    np.savez(tmp_path / "ok.npz", **batch[1])
    cli_json = json.loads(_run(tmp_path / "ok.npz", "--format", "json").output)
    assert cli_json == json.loads(examine(tmp_path / "ok.npz").to_json())
    assert cli_json["summary"]["layout"] == "TNC" and cli_json["summary"]["reduction"] == "mean"


def test_examine_refuses_the_torch_path_with_the_explanation(tmp_path, batch):
    """The library says the same as the command when asked for both."""
    from ctcbench.doctor.examine import examine
    np.savez(tmp_path / "ok.npz", **batch[1])
    with pytest.raises(ValueError, match="^--device: expected a diagnosis, got "
                                         "--explain-perfect-vs-blank$"):
        examine(tmp_path / "ok.npz", explain=True, device="cuda")
