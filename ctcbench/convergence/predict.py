"""Read line images with a trained checkpoint.

Images are untrusted input: each is opened under Pillow's decompression-bomb limit
(``Image.MAX_IMAGE_PIXELS``), fully decoded (a truncated file is an error naming it) and
converted to 8-bit grayscale from any mode (P, LA, RGBA, CMYK, I;16, I, F, ...).
"""
from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import torch

from ctcbench.convergence.checkpoints import load_checkpoint
from ctcbench.settings import ConfigError
from ctcbench.convergence.data import decode_text, ink_image
from ctcbench.convergence.decode import MAX_BEAM
from ctcbench.convergence.evaluation import decode_outputs
from ctcbench.convergence.models import build_model
from ctcbench.convergence.trainconfig import TrainConfig


def model_from_checkpoint(path):
    """``(model in eval mode, TrainConfig)`` of a checkpoint, checked: its config is valid
    and its weights fit it."""
    state = load_checkpoint(path)
    try:
        cfg = TrainConfig.from_dict(state["config"])
    except (TypeError, ValueError, AttributeError):
        raise ValueError(f"checkpoint: expected a config written by `ctcbench convergence`, "
                         f"got {str(path)!r} (its config has unknown or missing fields)") from None
    try:  # a charset that cannot name the model's classes would fail at decode time
        cfg.check()
    except ConfigError as exc:
        raise ValueError(f"checkpoint: expected a valid config, got {str(path)!r} "
                         f"(config {exc})") from None
    if cfg.model.num_classes != len(cfg.data.charset) + 1:
        raise ValueError(f"checkpoint: expected model.num_classes = len(data.charset) + 1 = "
                         f"{len(cfg.data.charset) + 1}, got {cfg.model.num_classes} in "
                         f"{str(path)!r}")
    for key in ("height", "width", "max_len"):  # the model follows the data (train.py)
        if getattr(cfg.model, key) != getattr(cfg.data, key):
            raise ValueError(f"checkpoint: expected model.{key} = data.{key} = "
                             f"{getattr(cfg.data, key)}, got {getattr(cfg.model, key)} in "
                             f"{str(path)!r}")
    try:
        model = build_model(cfg.model)
        model.load_state_dict(state["model"])
    except (TypeError, ValueError, KeyError, RuntimeError, AttributeError):
        raise ValueError(f"checkpoint: expected a model and config written by `ctcbench "
                         f"convergence`, got {str(path)!r} (its weights do not fit its "
                         f"config)") from None
    bad = [name for name, w in state["model"].items()
           if w.is_floating_point() and not bool(w.isfinite().all())]
    if bad:  # a model of NaN weights reads every line as nothing
        raise ValueError(f"checkpoint: expected finite weights, got NaN or inf in "
                         f"{', '.join(bad[:3])}{' ...' if len(bad) > 3 else ''} of {str(path)!r}")
    model.eval()
    return model, cfg


def grayscale(img):
    """A PIL image of any mode -> mode ``L``: transparency over white, 16-bit and float
    images scaled from their own range (Pillow's ``convert("L")`` would clip them)."""
    from PIL import Image
    if img.mode in ("I", "I;16", "I;16B", "I;16L", "I;16N", "F"):
        arr = np.asarray(img, dtype=np.float64)  # (h, w)
        finite = arr[np.isfinite(arr)]
        lo, hi = (finite.min(), finite.max()) if finite.size else (0.0, 1.0)
        arr = np.nan_to_num((arr - lo) / (hi - lo if hi > lo else 1.0) * 255, nan=0.0)
        return Image.fromarray(np.clip(arr, 0, 255).astype(np.uint8), mode="L")
    if img.mode in ("RGBA", "LA", "PA") or (img.mode == "P" and "transparency" in img.info):
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("L")
    return img.convert("L")


def load_image(path: str | Path):
    """The image at ``path`` as a grayscale (mode ``L``) PIL image; ``FileNotFoundError`` or
    ``ValueError`` naming the file for anything that is not a readable, sane image."""
    from PIL import Image, UnidentifiedImageError
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image: expected an existing file, got {str(path)!r}")
    try:
        with warnings.catch_warnings():  # over half the bomb limit warns: refuse that too
            warnings.simplefilter("error", Image.DecompressionBombWarning)
            with Image.open(path) as img:
                img.load()
                return grayscale(img)
    except UnidentifiedImageError:
        raise ValueError(f"image: expected a PNG/JPEG/... image file, got {str(path)!r}") from None
    except (Image.DecompressionBombError, Image.DecompressionBombWarning) as exc:
        raise ValueError(f"image: expected at most {Image.MAX_IMAGE_PIXELS} pixels (Pillow's "
                         f"Image.MAX_IMAGE_PIXELS), got {str(path)!r} (a possible decompression "
                         f"bomb: {str(exc).split(',')[0]})") from None
    except (OSError, SyntaxError, ValueError, EOFError, MemoryError) as exc:  # truncated, corrupt
        raise ValueError(f"image: expected a complete, readable image file, got {str(path)!r} "
                         f"({str(exc) or type(exc).__name__})") from None


def _read(item, model, cfg, beam: int) -> str:
    """The text in one image (a path, PIL image or array)."""
    from PIL import Image
    img = load_image(item) if isinstance(item, (str, Path)) else item
    if isinstance(img, Image.Image):
        img = grayscale(img)
    # The per-position model needs the training width; CTC models take any width.
    width = cfg.data.width if not model.ctc else None
    ink = ink_image(img, height=cfg.data.height, width=width)  # (H, W)
    if model.ctc and ink.shape[1] < cfg.data.width:  # short images: pad to the training width
        ink = np.pad(ink, ((0, 0), (0, cfg.data.width - ink.shape[1])))
    x = torch.from_numpy(np.ascontiguousarray(ink)).reshape(1, 1, *ink.shape)  # (1, 1, H, W)
    labels = decode_outputs(model, model(x), beam=beam)[0]
    return decode_text(labels, cfg.data.charset)


@torch.no_grad()
def predict_images(checkpoint, images, *, beam: int = 0) -> list[dict]:
    """Decode each image (a path, PIL image or array): any mode, resized to the model's
    height with the aspect ratio kept. Returns ``{"image", "text", "error"}`` per image, in
    order: an image that cannot be read gets ``text`` None and its ``error``, and the others
    are still read."""
    if isinstance(beam, bool) or not isinstance(beam, (int, np.integer)) or not \
            0 <= beam <= MAX_BEAM:
        raise ValueError(f"beam: expected an integer in [0, {MAX_BEAM}] (0 = greedy), "
                         f"got {beam!r}")
    model, cfg = model_from_checkpoint(checkpoint)
    torch.set_num_threads(1)
    out = []
    for i, item in enumerate(images):
        name = str(item) if isinstance(item, (str, Path)) else f"<array {i}>"
        try:
            out.append({"image": name, "text": _read(item, model, cfg, beam), "error": None})
        except (ValueError, FileNotFoundError) as exc:
            out.append({"image": name, "text": None, "error": str(exc)})
    return out
