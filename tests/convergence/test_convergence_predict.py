"""`ctcbench predict`: a trained checkpoint reads line images it never saw, any colour mode."""
import pytest
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


@pytest.mark.long
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


@pytest.mark.long
def test_predict_table_and_beam(learned_run, tmp_path):
    """Table output is 'image<TAB>text'; beam search decoding runs too."""
    summary, _, cfg = learned_run
    paths, _ = _unseen_images(cfg, tmp_path, n=2)
    res = CliRunner().invoke(cli, ["predict", "--checkpoint", summary["checkpoint"], "--beam", "4", *paths])
    assert res.exit_code == 0, res.output
    lines = res.output.strip().splitlines()
    assert [ln.split("\t")[0] for ln in lines] == paths


@pytest.mark.long
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


def _non_checkpoints(tmp_path):
    """Files that are not convergence checkpoints, each with what the error must say."""
    import torch
    from dataclasses import asdict
    from ctcbench.convergence.trainconfig import TrainConfig
    garbage = tmp_path / "garbage.pt"
    garbage.write_bytes(b"\x00" * 64)
    plain = tmp_path / "plain.pt"
    torch.save({"weights": torch.zeros(2)}, plain)
    tensor = tmp_path / "tensor.pt"
    torch.save(torch.zeros(3), tensor)
    wrong = tmp_path / "wrong.pt"  # every key present, but the weights fit no model
    torch.save({"config": asdict(TrainConfig()), "step": 0, "model": {"w": torch.zeros(1)},
                "optimizer": {}, "scheduler": {}, "torch_rng": torch.zeros(1), "extra": {}}, wrong)
    from ctcbench.convergence.models import build_model
    from ctcbench.convergence.train import _sync_model_config
    cfg = TrainConfig()
    _sync_model_config(cfg)
    weights = build_model(cfg.model).state_dict()
    name = next(iter(weights))
    weights[name] = weights[name] * float("nan")  # a run that diverged, saved
    diverged = tmp_path / "diverged.pt"
    torch.save({"config": asdict(cfg), "step": 0, "model": weights, "optimizer": {},
                "scheduler": {}, "torch_rng": torch.zeros(1), "extra": {}}, diverged)
    taller = tmp_path / "taller.pt"  # the data's height edited, the model's left
    config = asdict(cfg)
    config["data"]["height"] = 64
    torch.save({"config": config, "step": 0, "model": build_model(cfg.model).state_dict(),
                "optimizer": {}, "scheduler": {}, "torch_rng": torch.zeros(1), "extra": {}},
               taller)
    return [(garbage, "not a torch file loadable with weights_only=True"),
            (plain, "missing config"), (tensor, "missing config"),
            (wrong, "its weights do not fit its config"),
            (diverged, f"checkpoint: expected finite weights, got NaN or inf in {name} of"),
            (taller, "checkpoint: expected model.height = data.height = 64, got 32 in")]


def test_non_checkpoint_files_are_one_line_errors(tmp_path):
    """Corrupt bytes, a foreign torch file, a bare tensor and mismatched weights passed as
    --checkpoint each give one clear error line, no traceback."""
    image = tmp_path / "line.png"
    Image.new("L", (64, 32), 255).save(image)
    for path, reason in _non_checkpoints(tmp_path):
        res = CliRunner().invoke(cli, ["predict", "--checkpoint", str(path), str(image)])
        assert res.exit_code == 1, res.output
        lines = res.output.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("Error: checkpoint: expected"), res.output
        assert reason in lines[0], res.output


def test_negative_beam_is_rejected(tmp_path):
    """predict --beam -1 is an error naming --beam, not a silent greedy decode."""
    image = tmp_path / "line.png"
    Image.new("L", (64, 32), 255).save(image)
    res = CliRunner().invoke(cli, ["predict", "--beam", "-1", "--checkpoint", str(tmp_path / "x.pt"),
                                   str(image)])
    assert res.exit_code != 0 and "beam: expected an integer in [0, 256]" in res.output, res.output
