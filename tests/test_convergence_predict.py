"""`ctcbench predict`: a trained checkpoint reads line images it never saw, any colour mode."""
import json

import numpy as np
from click.testing import CliRunner
from PIL import Image

from ctcbench.cli import cli
from ctcbench.convergence.data import DataConfig, make_pool
from ctcbench.convergence.decode import error_rates


def _unseen_images(cfg, tmp_path, n=12):
    """Lines from another data seed, saved as dark-on-light RGB and grayscale PNGs at twice
    the training size (predict must undo polarity, colour and size)."""
    data = DataConfig(**{**cfg.data.__dict__, "seed": 99, "test_size": n, "noise": 0.0})
    pool = make_pool(data, "test")
    paths, texts = [], []
    for i in range(n):
        gray = ((1 - pool.images[i]) * 255).astype(np.uint8)  # dark ink on white
        img = Image.fromarray(gray).resize((gray.shape[1] * 2, gray.shape[0] * 2))
        if i % 2:
            img = img.convert("RGB")
        path = tmp_path / f"line{i}.png"
        img.save(path)
        paths.append(str(path))
        texts.append(pool.text(i))
    return paths, texts


def test_predict_reads_unseen_lines(learned_run, tmp_path):
    """The short run's checkpoint reads new lines (another data seed, RGB and gray, 2x size)
    with a CER far below chance; JSON output names each image."""
    summary, _, cfg = learned_run
    paths, texts = _unseen_images(cfg, tmp_path)
    res = CliRunner().invoke(cli, ["predict", "--checkpoint", summary["checkpoint"], *paths,
                                   "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert [r["image"] for r in rows] == paths
    cer, _ = error_rates([r["text"] for r in rows], texts)
    assert cer < 0.3, (cer, [r["text"] for r in rows], texts)


def test_predict_table_and_beam(learned_run, tmp_path):
    """Table output is 'image<TAB>text'; beam search decoding runs too."""
    summary, _, cfg = learned_run
    paths, _ = _unseen_images(cfg, tmp_path, n=2)
    res = CliRunner().invoke(cli, ["predict", "--checkpoint", summary["checkpoint"], "--beam", "4", *paths])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert [ln.split("\t")[0] for ln in lines] == paths


def test_predict_errors(learned_run, tmp_path):
    """A missing checkpoint, a missing image and a non-image file are clean errors."""
    summary, _, _ = learned_run
    bad = tmp_path / "notes.png"
    bad.write_text("not an image")
    cases = [(["--checkpoint", str(tmp_path / "none.pt"), str(bad)], "checkpoint: expected an existing file"),
             (["--checkpoint", summary["checkpoint"], str(tmp_path / "none.png")], "image: expected an existing file"),
             (["--checkpoint", summary["checkpoint"], str(bad)], "image: expected a PNG/JPEG")]
    for args, message in cases:
        res = CliRunner().invoke(cli, ["predict", *args])
        assert res.exit_code != 0 and message in res.output, res.output
        assert "Traceback" not in res.output
