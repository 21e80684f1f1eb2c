"""Offline line data: deterministic, well-formed, cached faithfully, bad input rejected."""
import re

import numpy as np
import pytest

from ctcbench.convergence.data import (DataConfig, _digit_glyphs, decode_text, encode_text,
                                       ink_image, load_pool, make_pool)


@pytest.mark.parametrize("kind", ["lines", "captcha", "digits"])
def test_pool_is_deterministic_and_well_formed(kind):
    """Same config => identical images; labels come from the charset, lengths from the range."""
    cfg = DataConfig(kind=kind, train_size=6, test_size=3, min_len=2, max_len=5)
    a, b = make_pool(cfg, "train"), make_pool(cfg, "train")
    np.testing.assert_array_equal(a.images, b.images)
    assert a.images.shape == (6, 32, 128) and a.images.dtype == np.float32
    assert 0 <= a.images.min() and a.images.max() <= 1
    assert ((a.lengths >= 2) & (a.lengths <= 5)).all()
    for i in range(6):
        labels = a.labels[i, : a.lengths[i]]
        assert ((labels >= 1) & (labels <= 10)).all()
        assert (a.labels[i, a.lengths[i]:] == 0).all()
        assert a.images[i].max() > 0.5  # something was drawn
    other = make_pool(DataConfig(kind=kind, train_size=6, test_size=3, min_len=2, max_len=5, seed=1),
                      "train")
    assert not np.array_equal(a.images, other.images)


def test_train_and_test_differ():
    """The two splits are different streams."""
    cfg = DataConfig(train_size=4, test_size=4)
    assert not np.array_equal(make_pool(cfg, "train").images, make_pool(cfg, "test").images)


def test_digit_splits_use_disjoint_handwriting():
    """Train and test digit lines are built from disjoint load_digits samples."""
    train, _ = _digit_glyphs("train")
    test, _ = _digit_glyphs("test")
    assert len(train) + len(test) == 1797
    flat_train = {im.tobytes() for im in train}
    assert sum(im.tobytes() in flat_train for im in test) < 5  # only exact duplicate scans


def test_cache_round_trip(tmp_path):
    """A cached pool loads back equal to a freshly rendered one."""
    cfg = DataConfig(train_size=5, test_size=2)
    first = load_pool(cfg, "train", cache_dir=tmp_path)
    assert len(list(tmp_path.glob("*.npz"))) == 1
    again = load_pool(cfg, "train", cache_dir=tmp_path)
    fresh = make_pool(cfg, "train")
    np.testing.assert_array_equal(again.images, fresh.images)
    np.testing.assert_array_equal(first.labels, fresh.labels)
    assert again.charset == cfg.charset


def test_text_round_trip():
    """encode/decode are inverse; characters outside the charset are named."""
    assert decode_text(encode_text("a1b", "ab1"), "ab1") == "a1b"
    with pytest.raises(ValueError, match=r"text: expected characters from charset '01', got \['x'\]"):
        encode_text("0x", "01")


def test_ink_image_inverts_dark_on_light_and_keeps_aspect():
    """A dark stroke on white becomes high ink; the height is set and the aspect kept."""
    img = np.full((20, 80), 255, dtype=np.uint8)
    img[5:15, 10:30] = 0
    ink = ink_image(img, height=32)
    assert ink.shape == (32, 128)
    assert ink[:, :8].max() < 0.1 and ink[12:20, 20:40].mean() > 0.8
    rgb = np.stack([img] * 3, axis=-1)
    np.testing.assert_allclose(ink_image(rgb, height=32), ink, atol=1 / 255)


@pytest.mark.parametrize("field,value,message", [
    ("kind", "emnist", "kind: expected one of lines, captcha, digits, got 'emnist'"),
    ("charset", "aa", "charset: expected a non-empty string of distinct characters"),
    ("min_len", 0, "min_len: expected >= 1, got 0"),
    ("height", 8, "height: expected a multiple of 16, got 8"),
])
def test_bad_config_is_named(field, value, message):
    """Bad data settings give 'expected X, got Y' errors naming the setting."""
    with pytest.raises(ValueError, match=re.escape(message)):
        DataConfig(**{field: value}).check()


def test_digits_need_digit_charset():
    """--data digits only has the ten digits."""
    with pytest.raises(ValueError, match="charset: expected digits only"):
        DataConfig(kind="digits", charset="abc").check()
