"""Small line recognisers, each a module built from a ``ModelConfig`` (trainconfig.py).

Input ``x: (N, 1, H, W)`` float ink images. CTC models return ``(T, N, C)`` logits
(time-major, ``C = len(charset) + 1`` with blank 0) and ``frames(W)``, the ``T`` they
produce for a width. The non-CTC baseline returns ``(N, max_len, C)`` per-position logits
where class 0 means "no character here".

  * ``linecnn``      FSDL-style sliding window: ``unfold`` windows over the width, one
                     small CNN per window (shared weights), a linear classifier per window.
  * ``linecnnlstm``  the same windows, then a BiLSTM over them.
  * ``crnn``         4 conv(+BatchNorm optional)+pool blocks -> BiLSTM -> linear.
  * ``rescrnn``      a small residual CNN (the captcha model, no pretrained weights) -> BiLSTM.
  * ``perpos``       fixed-length per-position NLL baseline: CNN -> max_len softmaxes.
  * ``repeatvec``    a deliberately broken CRNN: conv features pooled to one vector, repeated
                     T times into the BiLSTM (the captcha bug; for the doctor's time check).
"""
from __future__ import annotations

import torch
import torch.nn as nn
import torch.nn.functional as F

from ctcbench.convergence.trainconfig import MODELS, ModelConfig
from ctcbench.runtime.factory import load_factory


def _conv(cin: int, cout: int, bn: bool, stride=1) -> nn.Sequential:
    layers = [nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=not bn)]
    if bn:
        layers.append(nn.BatchNorm2d(cout))
    layers.append(nn.ReLU(inplace=True))
    return nn.Sequential(*layers)


class CRNN(nn.Module):
    """conv-pool x4 (pools 2x2, 2x2, 2x1, 2x1: H/16, W/4) -> BiLSTM -> linear."""

    ctc = True

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        c = cfg.channels
        chans = [1, c, 2 * c, 4 * c, 4 * c]
        pools = [(2, 2), (2, 2), (2, 1), (2, 1)]
        blocks = []
        for cin, cout, pool in zip(chans[:-1], chans[1:], pools):
            blocks += [_conv(cin, cout, cfg.batchnorm), nn.MaxPool2d(pool)]
        self.cnn = nn.Sequential(*blocks)
        feat = chans[-1] * (cfg.height // 16)
        self.rnn = nn.LSTM(feat, cfg.hidden, bidirectional=True)
        self.head = nn.Linear(2 * cfg.hidden, cfg.num_classes)

    def frames(self, width: int) -> int:
        return width // 4

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.cnn(x)  # (N, c, H/16, W/4)
        N, c, h, T = f.shape
        f = f.reshape(N, c * h, T).permute(2, 0, 1)  # (T, N, c*h)
        f, _ = self.rnn(f)  # (T, N, 2*hidden)
        return self.head(f)  # (T, N, C)


class RepeatVector(CRNN):
    """The captcha bug, kept as a model to test diagnostics on: the CRNN's conv features are
    pooled to ONE vector per image and that vector is repeated for all ``T`` time steps
    before the BiLSTM, so every frame sees the same input and the model cannot place
    labels (``ctcbench doctor`` reports ``time-invariant``)."""

    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        feat = self.rnn.input_size // (cfg.height // 16)  # the conv channels
        self.rnn = nn.LSTM(feat, cfg.hidden, bidirectional=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = self.cnn(x)  # (N, c, H/16, W/4)
        T = f.shape[-1]
        v = f.mean(dim=(2, 3))  # (N, c): one vector per image
        seq = v.unsqueeze(0).expand(T, -1, -1)  # (T, N, c): the same vector at every step
        f, _ = self.rnn(seq.contiguous())  # (T, N, 2*hidden)
        return self.head(f)  # (T, N, C)


class ResBlock(nn.Module):
    """Two 3x3 convs with a (1x1 conv when the shape changes) skip; BatchNorm after each conv
    when ``bn``, else the convs carry biases."""

    def __init__(self, cin: int, cout: int, stride, bn: bool):
        super().__init__()
        norm = (lambda: nn.BatchNorm2d(cout)) if bn else nn.Identity
        self.conv1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1, bias=not bn)
        self.bn1 = norm()
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=not bn)
        self.bn2 = norm()
        self.skip = (nn.Identity() if cin == cout and stride == 1 else
                     nn.Sequential(nn.Conv2d(cin, cout, 1, stride=stride, bias=not bn), norm()))

    def forward(self, x):
        y = F.relu(self.bn1(self.conv1(x)))
        return F.relu(self.bn2(self.conv2(y)) + self.skip(x))


class ResCRNN(nn.Module):
    """A small ResNet (stem + 4 residual blocks, H/16, W/4) -> BiLSTM -> linear, trained
    from scratch: the captcha recogniser without the pretrained backbone."""

    ctc = True

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        c = cfg.channels
        bn = cfg.batchnorm
        self.stem = _conv(1, c, bn)
        self.blocks = nn.Sequential(ResBlock(c, c, (2, 2), bn), ResBlock(c, 2 * c, (2, 2), bn),
                                    ResBlock(2 * c, 4 * c, (2, 1), bn),
                                    ResBlock(4 * c, 4 * c, (2, 1), bn))
        self.rnn = nn.LSTM(4 * c * (cfg.height // 16), cfg.hidden, bidirectional=True)
        self.head = nn.Linear(2 * cfg.hidden, cfg.num_classes)

    def frames(self, width: int) -> int:
        return (width + 3) // 4

    def forward(self, x):
        f = self.blocks(self.stem(x))  # (N, 4c, H/16, W/4)
        N, c, h, T = f.shape
        f, _ = self.rnn(f.reshape(N, c * h, T).permute(2, 0, 1))  # (T, N, 2*hidden)
        return self.head(f)  # (T, N, C)


class WindowCNN(nn.Module):
    """The FSDL sliding window: cut ``(H, window)`` windows every ``stride`` pixels with
    ``unfold`` and encode each with the same small CNN."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        c = cfg.channels
        self.window, self.stride = cfg.window, cfg.stride
        self.cnn = nn.Sequential(_conv(1, c, cfg.batchnorm), nn.MaxPool2d(2),
                                 _conv(c, 2 * c, cfg.batchnorm), nn.MaxPool2d(2),
                                 _conv(2 * c, 4 * c, cfg.batchnorm), nn.AdaptiveAvgPool2d(1))
        self.out_features = 4 * c

    def frames(self, width: int) -> int:
        return (width - self.window) // self.stride + 1

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        N, _, H, W = x.shape
        if W < self.window:
            raise ValueError(f"image width: expected >= window {self.window}, got {W}")
        win = x.unfold(3, self.window, self.stride)  # (N, 1, H, T, window)
        T = win.shape[3]
        win = win.permute(0, 3, 1, 2, 4).reshape(N * T, 1, H, self.window)  # (N*T, 1, H, window)
        f = self.cnn(win).reshape(N, T, -1)  # (N, T, 4c)
        return f.permute(1, 0, 2)  # (T, N, 4c)


class LineCNN(nn.Module):
    ctc = True

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.windows = WindowCNN(cfg)
        self.head = nn.Linear(self.windows.out_features, cfg.num_classes)

    def frames(self, width: int) -> int:
        return self.windows.frames(width)

    def forward(self, x):
        return self.head(self.windows(x))  # (T, N, C)


class LineCNNLSTM(LineCNN):
    def __init__(self, cfg: ModelConfig):
        super().__init__(cfg)
        self.rnn = nn.LSTM(self.windows.out_features, cfg.hidden, bidirectional=True)
        self.head = nn.Linear(2 * cfg.hidden, cfg.num_classes)

    def forward(self, x):
        f, _ = self.rnn(self.windows(x))  # (T, N, 2*hidden)
        return self.head(f)  # (T, N, C)


class PerPosition(nn.Module):
    """Non-CTC baseline: CNN over the whole (fixed-size) line -> ``max_len`` softmaxes, each
    over the charset plus class 0 = "no character". Trained with per-position NLL."""

    ctc = False

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        c = cfg.channels
        self.width, self.max_len, self.num_classes = cfg.width, cfg.max_len, cfg.num_classes
        self.cnn = nn.Sequential(_conv(1, c, cfg.batchnorm), nn.MaxPool2d(2),
                                 _conv(c, 2 * c, cfg.batchnorm), nn.MaxPool2d(2),
                                 _conv(2 * c, 4 * c, cfg.batchnorm), nn.MaxPool2d(2),
                                 _conv(4 * c, 4 * c, cfg.batchnorm), nn.MaxPool2d(2))
        feat = 4 * c * (cfg.height // 16) * (cfg.width // 16)
        self.fc = nn.Sequential(nn.Linear(feat, 256), nn.ReLU(inplace=True),
                                nn.Linear(256, cfg.max_len * cfg.num_classes))

    def forward(self, x):
        N, _, H, W = x.shape
        if W != self.width:
            raise ValueError(f"image width: expected {self.width} for the per-position model, got {W}")
        f = self.cnn(x).reshape(N, -1)  # (N, 4c * H/16 * W/16)
        return self.fc(f).reshape(N, self.max_len, self.num_classes)  # (N, max_len, C)


def build_model(cfg: ModelConfig) -> nn.Module:
    if cfg.name not in MODELS:
        raise ValueError(f"model: expected one of {', '.join(MODELS)}, got {cfg.name!r}")
    if cfg.height % 16:
        raise ValueError(f"height: expected a multiple of 16, got {cfg.height}")
    return load_factory(MODELS[cfg.name])(cfg)


def num_params(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())
