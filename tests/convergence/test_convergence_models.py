"""Models: the shapes each one promises, enough CTC frames, clear errors."""
import pytest
import torch

from ctcbench.convergence.models import build_model, num_params
from ctcbench.convergence.trainconfig import MODELS, ModelConfig
from ctcbench.runtime.factory import load_factory


def _pool(w, k):  # MaxPool2d, kernel = stride = k along the width
    return w // k


def _conv(w, k, s, p):  # Conv2d along the width
    return (w + 2 * p - k) // s + 1


# Frames T for a line of width W, from each model's layers as its docstring describes them
# (the default window 16 and stride 4 for the sliding-window models)
FRAMES = {
    "crnn": lambda w: _pool(_pool(_pool(_pool(w, 2), 2), 1), 1),  # pools 2x2, 2x2, 2x1, 2x1
    "repeatvec": lambda w: _pool(_pool(_pool(_pool(w, 2), 2), 1), 1),  # the CRNN's convs
    "rescrnn": lambda w: _conv(_conv(w, 3, 2, 1), 3, 2, 1),  # two stride-2 3x3 blocks, then 1
    "linecnn": lambda w: (w - 16) // 4 + 1,  # 16-px windows every 4 px
    "linecnnlstm": lambda w: (w - 16) // 4 + 1,
}


def test_frames_by_hand():
    """The arithmetic above, worked out: 128 px give the CRNN 32 frames, the windows 29."""
    assert [FRAMES["crnn"](w) for w in (64, 70, 128)] == [16, 17, 32]
    assert [FRAMES["rescrnn"](w) for w in (64, 70, 128)] == [16, 18, 32]
    assert [FRAMES["linecnn"](w) for w in (64, 70, 128)] == [13, 14, 29]


@pytest.mark.parametrize("name", [n for n, path in MODELS.items() if load_factory(path).ctc])
@pytest.mark.parametrize("width", [64, 70, 128])
def test_ctc_models_are_time_major_with_frames(name, width):
    """CTC models return (T, N, C) with T from their layers' arithmetic, which frames(W)
    (what check_fits uses) also gives, and T fits max_len labels with repeats."""
    torch.manual_seed(0)
    cfg = ModelConfig(name=name, num_classes=7, channels=4, hidden=8, width=width)
    model = build_model(cfg)
    out = model(torch.rand(3, 1, 32, width))
    T = FRAMES[name](width)
    assert out.shape == (T, 3, 7)
    assert model.frames(width) == T
    assert T >= 2 * (width // 16) - 1  # a line of width/16 characters, all repeated


def test_per_position_model_shape_and_width_check():
    """The non-CTC baseline gives (N, max_len, C) and refuses other widths clearly."""
    model = build_model(ModelConfig(name="perpos", num_classes=5, max_len=6, channels=4))
    assert model(torch.rand(2, 1, 32, 128)).shape == (2, 6, 5)
    with pytest.raises(ValueError, match="image width: expected 128 for the per-position model, got 64"):
        model(torch.rand(2, 1, 32, 64))


@pytest.mark.parametrize("name", list(MODELS))
def test_batchnorm_switch_puts_one_batchnorm_after_every_conv(name):
    """--batchnorm inserts a BatchNorm after each conv layer of every model, and
    --no-batchnorm leaves none (the ResNet's convs then carry biases)."""
    def count(bn, kind):
        m = build_model(ModelConfig(name=name, batchnorm=bn, channels=4))
        return sum(isinstance(x, kind) for x in m.modules())
    convs = count(True, torch.nn.Conv2d)
    assert convs >= 3
    assert count(True, torch.nn.BatchNorm2d) == convs
    assert count(False, torch.nn.BatchNorm2d) == 0


def test_crnn_size_at_32_channels():
    """The issue's CRNN (32 channels, BiLSTM 128) has about 640k parameters."""
    n = num_params(build_model(ModelConfig(name="crnn", channels=32, hidden=128)))
    assert 600_000 < n < 680_000


def test_unknown_model_and_bad_height():
    """Unknown names and heights that the pooling cannot divide are clear errors."""
    with pytest.raises(ValueError, match="model: expected one of linecnn, .*, got 'vgg'"):
        build_model(ModelConfig(name="vgg"))
    with pytest.raises(ValueError, match="height: expected a multiple of 16, got 40"):
        build_model(ModelConfig(height=40))
