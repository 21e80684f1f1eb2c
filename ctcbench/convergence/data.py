"""Offline line images with their transcripts, deterministic from a seed; no downloads.

Three sources, chosen by name through ``DATASETS``:
  * ``lines``:   text rendered with the TrueType fonts matplotlib ships (DejaVu), random
                 font, size, spacing, gaps between characters, vertical jitter and noise;
  * ``captcha``: images from the ``captcha`` library (its own font, warps, noise dots);
  * ``digits``:  lines composed from scikit-learn's ``load_digits`` handwritten digits
                 (an EMNIST-lines analogue; train and test use disjoint digit images).

Every image is ``(H, W)`` float32 in ``[0, 1]`` with ink = 1 (``ink_image`` does the same
for a user's image). Labels are class indices ``1..len(charset)``; ``0`` is the CTC blank.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import random
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from ctcbench.settings import NON_NEGATIVE, NON_NEGATIVE_INT, at_least, check_config, setting
from ctcbench.convergence.datacache import check_cache_dir, load_or_build
from ctcbench.progress import Progress
from ctcbench.errors import expect

BLANK = 0


@dataclass
class DataConfig:
    kind: str = setting("lines", "Synthetic font lines, captchas, or load_digits lines.",
                        choices=lambda: DATASETS, option="--data")
    charset: str = setting("0123456789", "Characters the lines are drawn from.",
                           check=(lambda v: len(v) > 0 and len(set(v)) == len(v)
                                  and v.isprintable() and not any(c.isspace() for c in v),
                                  "a non-empty string of distinct characters, printable "
                                  "and no spaces"))
    min_len: int = setting(4, "Shortest line, in characters.", check=at_least(1))
    max_len: int = setting(8, "Longest line, in characters.", check=at_least(1))
    height: int = setting(32, "Line image height in pixels.",
                          check=(lambda v: v >= 16 and v % 16 == 0, "a multiple of 16"))
    width: int = setting(128, "Line image width in pixels.", check=at_least(16))
    train_size: int = setting(8000, "Training lines rendered.", check=at_least(1))
    test_size: int = setting(512, "Held-out lines rendered.", check=at_least(1))
    # the data seed; a run's own seed only changes init and batch order
    seed: int = setting(0, "Seed of the rendered lines.", check=NON_NEGATIVE_INT,
                        option="--data-seed")
    gaps: bool = setting(True, "Random wider gaps between characters.")
    noise: float = setting(0.05, "Std of additive Gaussian noise, in ink units.",
                           check=NON_NEGATIVE)

    def check(self) -> "DataConfig":
        return check_config(self)

    def relations(self) -> list[tuple[str, bool, str, object]]:
        """Checks across fields, for ``check_config``: (field, holds, expected, got)."""
        return [("max_len", self.min_len <= self.max_len, f">= min_len ({self.min_len})",
                 self.max_len),
                ("width", self.width >= self.height, f">= height ({self.height})", self.width),
                ("charset", self.kind != "digits" or set(self.charset) <= set("0123456789"),
                 "digits only for data kind 'digits'", self.charset)]


@dataclass
class Pool:
    """A set of line images: ``images (M, H, W)`` float32, ``labels (M, max_len)`` int64
    padded with 0, ``lengths (M,)`` int64, and the charset that maps labels to text."""

    images: np.ndarray
    labels: np.ndarray
    lengths: np.ndarray
    charset: str

    def __len__(self) -> int:
        return len(self.images)

    def text(self, i: int) -> str:
        return decode_text(self.labels[i, : self.lengths[i]], self.charset)


def encode_text(text: str, charset: str) -> list[int]:
    bad = sorted(set(text) - set(charset))
    expect(not bad, "text", f"characters from charset {charset!r}", f"{bad}")
    return [charset.index(ch) + 1 for ch in text]


def decode_text(labels, charset: str) -> str:
    return "".join(charset[int(k) - 1] for k in labels)


# -- rendering helpers --------------------------------------------------------------------
def font_paths() -> list[Path]:
    """matplotlib's DejaVu TrueType fonts (always installed with matplotlib)."""
    import matplotlib
    ttf = Path(matplotlib.get_data_path()) / "fonts" / "ttf"
    fonts = sorted(p for p in ttf.glob("DejaVu*.ttf") if "Display" not in p.name)
    if not fonts:
        raise FileNotFoundError(f"no DejaVu fonts found under {ttf}")
    return fonts


def fit_to_canvas(img: np.ndarray, height: int, width: int, rng: np.random.Generator | None,
                  ) -> np.ndarray:
    """Ink image of any size -> ``(height, width)``: scale to the height (aspect kept), shrink
    further if too wide, paste at a random (or left) horizontal offset."""
    from PIL import Image
    h, w = img.shape
    scale = height / max(h, 1)
    new_w = max(1, round(w * scale))
    new_h = height
    if new_w > width:  # too wide: shrink both, keep aspect
        new_h = max(1, round(height * width / new_w))
        new_w = width
    pil = Image.fromarray((np.clip(img, 0, 1) * 255).astype(np.uint8))
    small = np.asarray(pil.resize((new_w, new_h), Image.BILINEAR), dtype=np.float32) / 255
    canvas = np.zeros((height, width), dtype=np.float32)  # (H, W)
    x0 = int(rng.integers(0, width - new_w + 1)) if rng is not None else 0
    y0 = (height - new_h) // 2
    canvas[y0:y0 + new_h, x0:x0 + new_w] = small
    return canvas


def _random_text(rng: np.random.Generator, cfg: DataConfig) -> str:
    n = int(rng.integers(cfg.min_len, cfg.max_len + 1))
    return "".join(rng.choice(list(cfg.charset), size=n))


def _render_font_line(text: str, rng: np.random.Generator, cfg: DataConfig, fonts) -> np.ndarray:
    from PIL import Image, ImageDraw, ImageFont
    size = int(rng.integers(22, 36))
    font = ImageFont.truetype(str(fonts[int(rng.integers(len(fonts)))]), size)
    pad = size
    canvas = Image.new("L", (pad * (len(text) + 2) * 2, pad * 3), 0)
    draw = ImageDraw.Draw(canvas)
    x = pad
    spacing = rng.uniform(-0.05, 0.25) * size
    for ch in text:
        y = pad + rng.normal(0, 0.06) * size  # vertical jitter
        draw.text((x, y), ch, fill=int(rng.integers(170, 256)), font=font)
        x += font.getlength(ch) + spacing
        if cfg.gaps and rng.random() < 0.2:
            x += rng.uniform(0.3, 1.0) * size  # a random wider gap
    ink = np.asarray(canvas, dtype=np.float32) / 255  # (h, w)
    rows, cols = np.nonzero(ink > 0.05)
    ink = ink[max(rows.min() - 2, 0): rows.max() + 3, max(cols.min() - 2, 0): cols.max() + 3]
    return fit_to_canvas(ink, cfg.height, cfg.width, rng)


class _SeededSecrets(random.Random):
    """Stands in for the ``secrets`` module inside ``captcha.image`` so images are seeded."""

    def randbelow(self, n: int) -> int:
        return self.randrange(n)

    def randbits(self, k: int) -> int:
        return self.getrandbits(k)


@contextlib.contextmanager
def _seeded_captcha(seed: int):
    import captcha.image as ci
    saved = ci.secrets
    ci.secrets = _SeededSecrets(seed)
    try:
        yield ci
    finally:
        ci.secrets = saved


def _render_captcha(text: str, rng: np.random.Generator, cfg: DataConfig, generator) -> np.ndarray:
    with _seeded_captcha(int(rng.integers(2**31))):
        img = generator.generate_image(text)
    return ink_image(img, height=cfg.height, width=cfg.width)


@functools.lru_cache(maxsize=2)
def _digit_glyphs(split: str):
    """``load_digits`` 8x8 images split into disjoint train/test halves by index."""
    from sklearn.datasets import load_digits
    d = load_digits()
    idx = np.arange(len(d.target))
    keep = idx % 5 != 0 if split == "train" else idx % 5 == 0  # 80/20, disjoint
    return d.images[keep] / 16.0, d.target[keep]


def _render_digits_line(text: str, rng: np.random.Generator, cfg: DataConfig, glyphs) -> np.ndarray:
    from PIL import Image
    images, targets = glyphs
    parts = []
    for ch in text:
        choices = np.flatnonzero(targets == int(ch))
        g = images[rng.choice(choices)]  # (8, 8)
        s = int(rng.integers(20, 29))
        g = np.asarray(Image.fromarray((g * 255).astype(np.uint8)).resize((s, s), Image.BILINEAR),
                       dtype=np.float32) / 255
        top = int(rng.integers(0, 28 - s + 1))
        cell = np.zeros((28, s), dtype=np.float32)
        cell[top:top + s] = g
        parts.append(cell)
        gap = int(rng.integers(-2, 4)) + (int(rng.integers(6, 16)) if cfg.gaps and rng.random() < 0.2 else 0)
        if gap > 0:
            parts.append(np.zeros((28, gap), dtype=np.float32))
    return fit_to_canvas(np.concatenate(parts, axis=1), cfg.height, cfg.width, rng)


DATASETS = {"lines": _render_font_line, "captcha": _render_captcha, "digits": _render_digits_line}


def _renderer_state(cfg: DataConfig, split: str):
    if cfg.kind == "lines":
        return font_paths()
    if cfg.kind == "captcha":
        from captcha.image import ImageCaptcha
        return ImageCaptcha(width=40 * cfg.max_len, height=60)
    return _digit_glyphs(split)


def make_pool(cfg: DataConfig, split: str, *, progress: bool = False) -> Pool:
    """Generate the ``split`` ("train" or "test") pool; same config and split => same pool."""
    cfg.check()
    expect(split in ("train", "test"), "split", "'train' or 'test'", repr(split))
    size = cfg.train_size if split == "train" else cfg.test_size
    rng = np.random.default_rng([cfg.seed, 0 if split == "train" else 1])
    state = _renderer_state(cfg, split)
    render = DATASETS[cfg.kind]
    images = np.zeros((size, cfg.height, cfg.width), dtype=np.float32)  # (M, H, W)
    labels = np.zeros((size, cfg.max_len), dtype=np.int64)  # (M, max_len)
    lengths = np.zeros(size, dtype=np.int64)
    bar = Progress(f"render {cfg.kind}/{split}", total=size, unit="images", enabled=progress,
                   leave=False)
    for i in range(size):
        text = _random_text(rng, cfg)
        img = render(text, rng, cfg, state)
        if cfg.noise > 0:
            img = img + rng.normal(0, cfg.noise, size=img.shape).astype(np.float32)
        images[i] = np.clip(img, 0, 1)
        lengths[i] = len(text)
        labels[i, : len(text)] = encode_text(text, cfg.charset)
        bar.update()
    bar.close()
    return Pool(images, labels, lengths, cfg.charset)


RENDER_PACKAGES = ("Pillow", "captcha", "scikit-learn", "numpy", "matplotlib")  # matplotlib: the fonts


def cache_key(cfg: DataConfig, split: str) -> str:
    blob = json.dumps({**asdict(cfg), "split": split, "v": 1}, sort_keys=True)
    return f"{cfg.kind}-{split}-{hashlib.sha1(blob.encode()).hexdigest()[:12]}"


def cache_path(cfg: DataConfig, split: str, cache_dir: str | Path) -> Path:
    """Where ``load_pool`` keeps the ``split`` pool of ``cfg`` under ``cache_dir``."""
    return Path(cache_dir) / f"{cache_key(cfg, split)}.npz"


def cache_meta(cfg: DataConfig, split: str) -> dict:
    """What a cached pool was built from: the key, the full config, and the rendering libraries."""
    from importlib.metadata import PackageNotFoundError, version

    def installed(name):
        try:
            return version(name)
        except PackageNotFoundError:
            return None
    return {"key": cache_key(cfg, split), "config": asdict(cfg), "split": split,
            "versions": {name: installed(name) for name in RENDER_PACKAGES}}


def load_pool(cfg: DataConfig, split: str, *, cache_dir: str | Path | None = None,
              progress: bool = False) -> Pool:
    """``make_pool`` with an on-disk ``.npz`` cache keyed by the full config.

    Safe for several processes filling one ``cache_dir`` at once (see ``datacache``); a damaged,
    foreign or stale entry is rebuilt with a note on stderr. An unusable ``cache_dir`` raises
    ``ValueError`` naming ``--cache-dir``.
    """
    if cache_dir is None:
        return make_pool(cfg, split, progress=progress)
    cfg.check()
    expect(split in ("train", "test"), "split", "'train' or 'test'", repr(split))
    check_cache_dir(cache_dir, create=True)
    size = cfg.train_size if split == "train" else cfg.test_size
    layout = {"images": ((size, cfg.height, cfg.width), np.float32),  # (M, H, W)
              "labels": ((size, cfg.max_len), np.int64),  # (M, max_len)
              "lengths": ((size,), np.int64)}  # (M,)

    def build():
        pool = make_pool(cfg, split, progress=progress)
        return {"images": pool.images, "labels": pool.labels, "lengths": pool.lengths}
    arrays = load_or_build(cache_path(cfg, split, cache_dir), cache_meta(cfg, split), build,
                           layout=layout)
    return Pool(arrays["images"], arrays["labels"], arrays["lengths"], cfg.charset)


def ink_image(img, *, height: int, width: int | None = None) -> np.ndarray:
    """Any PIL image or array (grayscale or RGB) -> ``(height, W)`` float32 ink in ``[0, 1]``.

    Aspect ratio is kept; with ``width`` the result is shrunk to fit and right-padded to it.
    Dark-on-light images are inverted so that ink is high, as in training.
    """
    from PIL import Image
    if not isinstance(img, Image.Image):
        arr = np.asarray(img)
        expect(arr.ndim in (2, 3), "image", "a 2-D grayscale or 3-D RGB array", f"shape {arr.shape}")
        if arr.dtype.kind == "f":
            arr = np.clip(arr * (255 if arr.max() <= 1 else 1), 0, 255)
        img = Image.fromarray(arr.astype(np.uint8))
    gray = np.asarray(img.convert("L"), dtype=np.float32) / 255  # (h, w)
    expect(gray.size > 0, "image", "a non-empty image", f"shape {gray.shape}")
    # Background = the most common intensity; light background => dark ink => invert.
    border = np.concatenate([gray[0], gray[-1], gray[:, 0], gray[:, -1]])
    ink = 1 - gray if np.median(border) > 0.5 else gray
    lo = np.percentile(ink, 5)
    ink = np.clip((ink - lo) / max(ink.max() - lo, 1e-6), 0, 1)
    if width is None:
        h, w = ink.shape
        width = max(height, round(w * height / h))
    return fit_to_canvas(ink, height, width, None)
