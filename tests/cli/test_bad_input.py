"""Bad input, one row per kind: each gets one clear error naming what is wrong, never a
traceback and never a silently wrong answer (docs/bad-input.md lists the kinds)."""
import io
import json
import struct
import textwrap
import zipfile
import zlib
from dataclasses import asdict

import numpy as np
import pytest
import torch
from click.testing import CliRunner
from PIL import Image

from ctcbench import CTCProblem
from ctcbench.caselib.builders import build_raw, to_problem
from ctcbench.caselib.library import load_cases, select_cases
from ctcbench.cli import cli
from ctcbench.runtime.registry import get_backend

LOGITS = np.zeros((4, 2, 3))  # (T, N, C)
TARGETS = np.array([[1], [2]])  # (N, L)
LENGTHS = np.array([4, 4])
ONES = np.array([1, 1])


def _problem(**change):
    kw = dict(logits=LOGITS, targets=TARGETS, input_lengths=LENGTHS, target_lengths=ONES)
    blank = change.pop("blank", 0)
    return CTCProblem(**{**kw, **change}, blank=blank)


def _build(**build):
    return build_raw({"generator": "random", "C": 3, "sample": [{"target": [1]}], **build},
                     case="c")


API_ROWS = [  # (kind, call, error type, fragments the message must hold)
    ("uint64 length that would wrap to -1",
     lambda: _problem(input_lengths=np.array([4, 2**64 - 1], dtype=np.uint64)), ValueError,
     ["input_lengths: expected values <= T = 4", "18446744073709551615"]),
    ("uint64 label that would wrap to -1",
     lambda: _problem(targets=np.array([[1], [2**64 - 1]], dtype=np.uint64)), ValueError,
     ["targets: expected labels in [0, 3)", "18446744073709551615"]),
    ("blank past the classes", lambda: _problem(blank=3), ValueError,
     ["blank: expected an index in [-3, 3)", "got 3"]),
    ("blank past -C", lambda: _problem(blank=-4), ValueError,
     ["blank: expected an index in [-3, 3)", "got -4"]),
    ("float blank", lambda: _problem(blank=1.0), ValueError, ["blank: expected an int"]),
    ("an array where a problem belongs", lambda: get_backend("numpy").run(LOGITS), TypeError,
     ["problem: expected a ctcbench.CTCProblem", "got ndarray"]),
    ("NaN upstream gradient", lambda: get_backend("numpy").run(_problem(), grad_weights=[np.nan, 1]),
     ValueError, ["grad_weights: expected", "finite", "nan"]),
    ("case C = 1 with the peaked generator",
     lambda: build_raw({"generator": "peaked", "C": 1, "sample": [{"target": [], "path": [0]}]},
                       case="c"), ValueError, ["case 'c' build.C: expected an integer >= 2"]),
    ("case blank >= C", lambda: _build(blank=4), ValueError,
     ["case 'c' build.blank: expected an integer in [-3, 2]", "got 4"]),
    ("case negative T", lambda: _build(T=-5), ValueError, ["case 'c' build.T: expected", "-5"]),
    ("case negative seed", lambda: _build(seed=-3), ValueError,
     ["case 'c' build.seed: expected an integer >= 0", "-3"]),
    ("case huge T", lambda: _build(T=10**12), ValueError, ["case 'c' build.T: expected", "10000"]),
    ("case ragged table",
     lambda: build_raw({"generator": "table", "sample": [{"target": [1],
                                                          "probs": [[0.5, 0.5], [0.2]]}]}, case="c"),
     ValueError, ["case 'c' build.sample[0].probs: expected a rectangular table", "[1, 2]"]),
    ("case label equal to the blank",
     lambda: build_raw({"generator": "random", "C": 3, "sample": [{"target": [0]}]}, case="c"),
     ValueError, ["case 'c' build.sample[0].target: expected", "other than the blank (0)",
                  "where 0 is the blank"]),
    ("case label typed as text",
     lambda: build_raw({"generator": "random", "C": 3, "sample": [{"target": ["a"]}]}, case="c"),
     ValueError, ["case 'c' build.sample[0].target: expected a list of integers"]),
    ("unknown dtype for a case problem", lambda: to_problem(_build(), "float8"), ValueError,
     ["dtype: expected one of float16, bfloat16, float32, float64", "float8"]),
    ("one folder given as a string", lambda: load_cases("no-such-folder"), ValueError,
     ["cases: expected a folder", "no-such-folder"]),
]


@pytest.mark.parametrize("kind, call, error, fragments", API_ROWS, ids=[r[0] for r in API_ROWS])
def test_api_bad_input_names_the_culprit(kind, call, error, fragments):
    """Each bad API input raises one error whose message names the argument or field."""
    with pytest.raises(error) as info:
        call()
    message = str(info.value)
    assert "\n" not in message and all(f in message for f in fragments), message


def test_a_validated_problem_cannot_be_changed():
    """Setting a target to the blank, or a length, after validation is refused, so no
    backend computes on an unvalidated problem; the caller's arrays stay theirs."""
    logits = LOGITS.copy()
    p = _problem(logits=logits)
    for array in (p.targets, p.input_lengths, p.target_lengths, p.logits):
        with pytest.raises(ValueError, match="read-only"):
            array[0] = 0
    logits[0, 0, 0] = np.nan  # the caller's own array is not the problem's
    assert np.isfinite(p.logits).all()


def test_negative_blank_counts_from_the_end():
    """blank = -1 is C - 1 (TensorFlow's blank_index = -1): the same problem and the same loss."""
    targets = np.array([[0], [1]])  # labels other than C - 1 = 2
    minus, plus = _problem(targets=targets, blank=-1), _problem(targets=targets, blank=2)
    assert minus.blank == 2
    numpy = get_backend("numpy")
    np.testing.assert_array_equal(numpy.run(minus).loss, numpy.run(plus).loss)


def test_a_single_glob_string_is_one_glob():
    """select_cases(cases, "tf_basic") selects that case, not the cases matching its letters."""
    assert [c.name for c in select_cases(load_cases(), "tf_basic")] == ["tf_basic"]


# -- command line ---------------------------------------------------------------------------
CASE = """
[[case]]
name = "x"
description = "d"
provenance = "p"
[case.build]
generator = "{generator}"
{build}
[[case.build.sample]]
{sample}
[case.expect]
oracle = "brute_force"
"""


def _case_dir(tmp_path, generator="random", build="C = 3", sample="target = [1]\nT = 2"):
    folder = tmp_path / "cases"
    folder.mkdir(exist_ok=True)
    (folder / "x.toml").write_text(CASE.format(generator=generator, build=build, sample=sample))
    return folder


def _beside_case(tmp_path, make):
    """The case folder with ``make(path)`` run on a second entry, y.toml."""
    folder = _case_dir(tmp_path)
    make(folder / "y.toml")
    return folder


def _checkpoint(tmp_path, charset="0123456789"):
    """An untrained convergence checkpoint (the format, not a trained model)."""
    from ctcbench.convergence.data import DataConfig
    from ctcbench.convergence.models import build_model
    from ctcbench.convergence.trainconfig import ModelConfig, TrainConfig
    cfg = TrainConfig(model=ModelConfig(name="crnn", channels=8, hidden=32, num_classes=11,
                                        width=64),  # the model follows the data
                      data=DataConfig(width=64))
    state = {"config": asdict(cfg), "step": 0, "model": build_model(cfg.model).state_dict(),
             "optimizer": {}, "scheduler": {}, "torch_rng": torch.zeros(1), "extra": {}}
    state["config"]["data"]["charset"] = charset
    path = tmp_path / f"ck{len(charset)}.pt"
    torch.save(state, path)
    return path


def _png_claiming(path, width, height):
    """A tiny PNG whose header claims width x height pixels (a decompression bomb's shape)."""
    def chunk(kind, data):
        return (struct.pack(">I", len(data)) + kind + data
                + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF))
    header = struct.pack(">IIBBBBB", width, height, 8, 0, 0, 0, 0)
    path.write_bytes(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header)
                     + chunk(b"IDAT", zlib.compress(b"\0" * 1000)) + chunk(b"IEND", b""))
    return path


def _files(tmp_path):
    ok = tmp_path / "ok.png"
    Image.new("L", (64, 32), 255).save(ok)
    truncated = tmp_path / "truncated.png"
    truncated.write_bytes(ok.read_bytes()[:60])
    (tmp_path / "nonutf8.csv").write_bytes(b"T,N,C,L\n\xff\xfe\n")
    (tmp_path / "folder.csv").mkdir()
    (tmp_path / "text.csv").write_text("T,N,C,L\n50,8,20,10\n")
    row = {"backend": "numpy", "T": 50, "N": 8, "C": 20, "L": 10, "dtype": "float64",
           "status": "ok"}
    (tmp_path / "words.json").write_text(json.dumps([{**row, "time_median_s": "fast"}]))
    (tmp_path / "zero.json").write_text(json.dumps([{**row, "time_median_s": 0}]))
    return {"ok": ok, "truncated": truncated, "bomb": _png_claiming(tmp_path / "bomb.png",
                                                                    100000, 100000)}


def _npz_claiming(tmp_path, shape):
    """A 1 kB .npz whose log_probs header claims ``shape`` float64 (written by NumPy)."""
    header = io.BytesIO()
    np.lib.format.write_array_header_1_0(header, {"descr": "<f8", "fortran_order": False,
                                                  "shape": shape})
    path = tmp_path / "huge.npz"
    np.savez(path, targets=np.ones((2, 1), int), input_lengths=np.array([4, 4]),
             target_lengths=np.array([1, 1]))
    with zipfile.ZipFile(path, "a") as archive:
        archive.writestr("log_probs.npy", header.getvalue() + bytes(64))
    return path


def _npz_of_zeros(tmp_path, nbytes):
    """A deflated .npz whose log_probs is ``nbytes`` of zeros (a few kB in the file)."""
    path = tmp_path / "zeros.npz"
    np.savez_compressed(path, log_probs=np.zeros(nbytes // 8), targets=np.ones((2, 1), int),
                        input_lengths=np.array([4, 4]), target_lengths=np.array([1, 1]))
    return path


CLI_ROWS = [  # (kind, args from tmp_path and files, fragments the one Error line must hold)
    ("case file: C = 1 with a generator that needs 2",
     lambda t, f: ["cases", "--cases", _case_dir(t, "peaked", "C = 1", "target = []\npath = [0]")],
     ["x.toml: case 'x' build.C: expected an integer >= 2"]),
    ("case file: blank = C is not taken modulo C",
     lambda t, f: ["cases", "--cases", _case_dir(t, build="C = 3\nblank = 4")],
     ["x.toml: case 'x' build.blank: expected an integer in [-3, 2], got 4"]),
    ("case file: T = -5", lambda t, f: ["cases", "--cases", _case_dir(t, sample="target = [1]\nT = -5")],
     ["x.toml: case 'x' build.sample[0].T: expected an integer in [0, 1000000], got -5"]),
    ("case file: seed = -3", lambda t, f: ["cases", "--cases", _case_dir(t, build="C = 3\nseed = -3")],
     ["x.toml: case 'x' build.seed: expected an integer >= 0, got -3"]),
    ("case file: ragged table",
     lambda t, f: ["cases", "--cases", _case_dir(t, "table", "", "target = [1]\nprobs = [[0.5, 0.5], [1.0]]")],
     ["build.sample[0].probs: expected a rectangular table"]),
    ("case file: what only the oracle finds (cases builds as compare does)",
     lambda t, f: ["cases", "--cases", _case_dir(t, sample="target = [1]\nT = 40")],
     ["x.toml: case 'x' (float32): logits: expected C**T <="]),
    ("case file: not UTF-8", lambda t, f: ["cases", "--cases", _beside_case(
        t, lambda y: y.write_bytes(b"\xff\xfe"))], ["y.toml: expected a UTF-8 text file"]),
    ("case file: a folder named like one", lambda t, f: ["cases", "--cases", _beside_case(
        t, lambda y: y.mkdir())], ["y.toml: expected a readable text file, got '",
                                   "y.toml' (Is a directory)"]),
    ("grid file: not UTF-8", lambda t, f: ["bench", "--grid", t / "nonutf8.csv"],
     ["nonutf8.csv: expected a UTF-8 text file"]),
    ("grid file: a folder", lambda t, f: ["bench", "--grid", t / "folder.csv"],
     ["grid: expected one of small", "folder.csv' (a folder)"]),
    ("baseline: a metric that is a word",
     lambda t, f: ["bench", "--grid", t / "text.csv", "--baseline", t / "words.json",
                   "--fail-on", "time:10%"],
     ["words.json row 1 (numpy at T=50 N=8 C=20 L=10 float64): expected a positive number in "
      "time_median_s for --fail-on time:10%, got 'fast'"]),
    ("baseline: a metric of 0",
     lambda t, f: ["bench", "--grid", t / "text.csv", "--baseline", t / "zero.json",
                   "--fail-on", "time:10%"], ["zero.json row 1", "got 0"]),
    ("doctor: an .npz header claiming 10**12 elements",
     lambda t, f: ["doctor", _npz_claiming(t, (10 ** 6, 10 ** 6))],
     ["huge.npz: log_probs.npy: expected at most 268435456 bytes", "got an array header "
      "claiming shape (1000000, 1000000) float64 = 8000000000000 bytes"]),
    ("doctor: a deflated member that inflates past --max-bytes",
     lambda t, f: ["doctor", "--max-bytes", 10 ** 6, _npz_of_zeros(t, 8 * 10 ** 6)],
     ["zeros.npz: log_probs.npy: expected at most 1000000 bytes", "got a member that inflates "
      "to 8000128 bytes"]),
    ("doctor: a plot path that is not a PNG", lambda t, f: ["doctor", "--plot", t / "out.txt", t / "x.npz"],
     ["--plot: expected a PNG path ending in .png, got"]),
    ("predict: a checkpoint with an empty charset",
     lambda t, f: ["predict", "--checkpoint", _checkpoint(t, charset=""), f["ok"]],
     ["checkpoint: expected a valid config", "data.charset: expected a non-empty string"]),
    ("predict: a huge beam", lambda t, f: ["predict", "--checkpoint", _checkpoint(t), "--beam",
                                           "100000000", f["ok"]],
     ["beam: expected an integer in [0, 256]"]),
]


@pytest.mark.parametrize("kind, args, fragments", CLI_ROWS, ids=[r[0] for r in CLI_ROWS])
def test_cli_bad_input_is_one_error_line(tmp_path, kind, args, fragments):
    """Each bad command line or file exits 1 with one 'Error:' line naming the culprit,
    before anything is written."""
    files = _files(tmp_path)
    res = CliRunner().invoke(cli, [str(a) for a in args(tmp_path, files)])
    assert res.exit_code == 1, res.output
    assert res.exception is None or isinstance(res.exception, SystemExit), res.exception
    assert "Traceback" not in res.output
    lines = res.output.strip().splitlines()
    assert lines[-1].startswith("Error: ") and all(f in lines[-1] for f in fragments), res.output
    assert not (tmp_path / "reports").exists()


def test_predict_reads_the_good_images_and_names_the_bad(tmp_path):
    """A truncated PNG and a decompression bomb each get a row with their error, the good
    image and every odd mode (P, LA, I;16, CMYK, RGBA, 1) are still read, and the exit is 1."""
    files = _files(tmp_path)
    odd = []
    for mode in ("P", "LA", "RGBA", "CMYK", "1"):
        path = tmp_path / f"mode_{mode}.{'jpg' if mode == 'CMYK' else 'png'}"
        Image.new("RGB", (64, 32), (255, 255, 255)).convert(mode).save(path)
        odd.append(path)
    deep = tmp_path / "mode_I16.png"
    Image.fromarray(np.full((32, 64), 60000, dtype=np.uint16)).save(deep)
    odd.append(deep)
    images = [files["ok"], files["truncated"], files["bomb"], *odd]
    res = CliRunner().invoke(cli, ["predict", "--checkpoint", str(_checkpoint(tmp_path)),
                                   *map(str, images), "--format", "json"])
    assert res.exit_code == 1 and "Traceback" not in res.output, res.output
    rows = json.loads(res.stdout)
    assert [r["image"] for r in rows] == [str(p) for p in images]
    errors = {r["image"]: r["error"] for r in rows}
    assert "truncated.png" in errors[str(files["truncated"])]
    assert "decompression bomb" in errors[str(files["bomb"])]
    assert "bomb.png" in errors[str(files["bomb"])]
    good = [r for r in rows if r["image"] not in (str(files["truncated"]), str(files["bomb"]))]
    assert all(r["error"] is None and isinstance(r["text"], str) for r in good), good
    assert "2 unreadable" in res.stderr


def test_greyscale_conversion_keeps_the_ink(tmp_path):
    """Transparent ink over nothing and 16-bit ink read as the same gray image as plain ink:
    alpha over white, 16-bit scaled from its own range (not clipped to white)."""
    from ctcbench.convergence.predict import load_image
    ink = np.full((8, 16), 255, dtype=np.uint8)
    ink[2:6, 4:12] = 0  # (h, w) dark ink on white
    rgba = np.zeros((8, 16, 4), dtype=np.uint8)
    rgba[..., 3] = 255 - ink  # black where ink, fully transparent elsewhere
    Image.fromarray(rgba, "RGBA").save(tmp_path / "alpha.png")
    Image.fromarray(ink.astype(np.uint16) * 257).save(tmp_path / "deep.png")  # 0 or 65535
    for name in ("alpha.png", "deep.png"):
        np.testing.assert_array_equal(np.asarray(load_image(tmp_path / name)), ink, err_msg=name)


def test_gate_with_nothing_comparable_fails(tmp_path):
    """compare() with --fail-on on a matched row whose baseline metric is missing reports that
    row, rather than passing on a comparison it never made."""
    from ctcbench.bench.baseline import compare, parse_fail_on
    row = {"backend": "numpy", "T": 1, "N": 1, "C": 3, "L": 1, "dtype": "float64",
           "status": "ok", "time_median_s": 0.5}
    old = {**row, "status": "error", "time_median_s": None}
    messages = compare([dict(row)], [old], [parse_fail_on("time:10%")])
    assert len(messages) == 1 and "numpy at T=1 N=1 C=3 L=1 float64" in messages[0], messages
    assert compare([dict(row)], [dict(row)], [parse_fail_on("time:10%")]) == []


def test_case_file_text_written_as_toml_round_trips():
    """The CASE template itself builds (so each CLI row above fails only on what it changes)."""
    import tomllib
    raw = tomllib.loads(textwrap.dedent(CASE.format(generator="random", build="C = 3",
                                                    sample="target = [1]\nT = 2")))
    assert build_raw(raw["case"][0]["build"], case="x").logits.shape == (2, 1, 3)
