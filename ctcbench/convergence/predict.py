"""Read line images with a trained checkpoint."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from ctcbench.convergence.data import decode_text, ink_image
from ctcbench.convergence.train import decode_outputs, model_from_checkpoint


def load_image(path: str | Path):
    from PIL import Image, UnidentifiedImageError
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"image: expected an existing file, got {str(path)!r}")
    try:
        with Image.open(path) as img:
            img.load()
            return img.copy()
    except UnidentifiedImageError:
        raise ValueError(f"image: expected a PNG/JPEG/... image file, got {str(path)!r}") from None


@torch.no_grad()
def predict_images(checkpoint, images, *, beam: int = 0) -> list[dict]:
    """Decode each image (a path, PIL image or array): grayscale or RGB, resized to the
    model's height with the aspect ratio kept. Returns ``{"image", "text"}`` per image."""
    if beam < 0:
        raise ValueError(f"beam: expected >= 0 (0 = greedy), got {beam}")
    model, cfg = model_from_checkpoint(checkpoint)
    torch.set_num_threads(1)
    out = []
    for item in images:
        img = load_image(item) if isinstance(item, (str, Path)) else item
        # The per-position model needs the training width; CTC models take any width.
        width = cfg.data.width if not model.ctc else None
        ink = ink_image(img, height=cfg.data.height, width=width)  # (H, W)
        if model.ctc and ink.shape[1] < cfg.data.width:  # short images: pad to the training width
            ink = np.pad(ink, ((0, 0), (0, cfg.data.width - ink.shape[1])))
        x = torch.from_numpy(np.ascontiguousarray(ink)).reshape(1, 1, *ink.shape)  # (1, 1, H, W)
        labels = decode_outputs(model, model(x), beam=beam)[0]
        out.append({"image": str(item) if isinstance(item, (str, Path)) else "<array>",
                    "text": decode_text(labels, cfg.data.charset)})
    return out
