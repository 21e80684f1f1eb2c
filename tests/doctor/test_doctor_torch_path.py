"""ctcbench.doctor.torch_path: the CUDA path (cuDNN or native) by torch's documented rule, each
condition on its own, checked without a GPU against the rule as the installed torch states it."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from ctcbench.doctor.torch_path import torch_path

T, N, C = 30, 3, 6


def _cudnn_batch(**over):
    """A batch that meets every documented cuDNN condition: float32, blank 0, concatenated
    int32 targets, int32 lengths all T, targets shorter than 256."""
    rng = np.random.default_rng(0)
    x = rng.normal(size=(T, N, C))
    lp = (x - np.log(np.exp(x).sum(-1, keepdims=True))).astype(np.float32)
    batch = dict(log_probs=lp, targets=np.array([1, 2, 3, 4, 5, 1, 2, 3], dtype=np.int32),
                 input_lengths=np.full(N, T, dtype=np.int32),
                 target_lengths=np.array([3, 3, 2], dtype=np.int32), blank=0)
    return batch | over


def test_the_documented_rule_is_the_one_the_installed_torch_states():
    """The conditions applied are those of torch.nn.CTCLoss's cuDNN note in this torch."""
    doc = " ".join(torch.nn.CTCLoss.__doc__.split())
    for words in ("must be in concatenated format", "all :attr:`input_lengths` must be `T`",
                  ":math:`blank=0`", ":attr:`target_lengths` :math:`\\leq 256`",
                  "must be of dtype :attr:`torch.int32`", "must be of dtype :attr:`torch.float32`"):
        assert words in doc, words


def test_a_batch_meeting_every_condition_takes_cudnn_and_says_how_to_leave_it():
    """All conditions hold: cuDNN, and the way to the native kernel is int64 targets."""
    report = torch_path(**_cudnn_batch())
    assert report.path == "cudnn" and all(c.holds for c in report.conditions)
    assert any("targets.long()" in f for f in report.force_other)
    assert any("#53505" in d for d in report.differences)


@pytest.mark.parametrize("over, failing", [
    (dict(log_probs=_cudnn_batch()["log_probs"].astype(np.float64)), "log_probs dtype"),
    (dict(blank=5), "blank"),
    (dict(targets=np.array([[1, 2, 3], [4, 5, 1], [2, 3, 0]], dtype=np.int32)), "targets layout"),
    (dict(targets=np.array([1, 2, 3, 4, 5, 1, 2, 3])), "targets dtype"),
    (dict(input_lengths=np.full(N, T)), "lengths dtype"),
    (dict(input_lengths=np.array([T, T, T - 1], dtype=np.int32)), "input lengths"),
])
def test_each_broken_condition_alone_sends_the_batch_to_native(over, failing):
    """One condition broken, the rest met: native, that condition (only) fails, and its fix is
    listed as the way to cuDNN."""
    report = torch_path(**_cudnn_batch(**over))
    assert report.path == "native"
    assert [c.name for c in report.conditions if not c.holds] == [failing]
    assert report.force_other[0].startswith(failing)
    assert any("#17798" in d for d in report.differences)


@pytest.mark.parametrize("length, path", [(255, "cudnn"), (256, "native")])
def test_target_length_256_leaves_cudnn(length, path):
    """A target of 255 labels still takes cuDNN; 256, where cuDNN fails (pytorch#53505), does not."""
    labels = np.arange(length, dtype=np.int32) % 4 + 1  # 1 2 3 4 1 ...: no adjacent repeat
    rng = np.random.default_rng(1)
    x = rng.normal(size=(300, 1, 6))
    lp = (x - np.log(np.exp(x).sum(-1, keepdims=True))).astype(np.float32)
    report = torch_path(log_probs=lp, targets=labels, input_lengths=np.array([300], np.int32),
                        target_lengths=np.array([length], np.int32))
    assert report.path == path


def test_cudnn_disabled_sends_the_batch_to_native():
    """torch.backends.cudnn.flags(enabled=False) is read: native."""
    with torch.backends.cudnn.flags(enabled=False):
        report = torch_path(**_cudnn_batch())
    assert report.path == "native"
    assert [c.name for c in report.conditions if not c.holds] == ["cuDNN enabled"]


def test_cpu_path_names_the_cpu_kernel_and_refuses_half():
    """device='cpu': the CPU kernel; float16 fails its dtype condition."""
    assert torch_path(**_cudnn_batch(), device="cpu").path == "cpu"
    half = torch_path(**_cudnn_batch(log_probs=_cudnn_batch()["log_probs"].astype(np.float16)),
                      device="cpu")
    assert not half.conditions[0].holds


def test_determinism_flags_are_read_and_said():
    """use_deterministic_algorithms(True) with a native batch: its CUDA backward would raise
    (torch's docstring lists CTCLoss); cudnn.deterministic False with a cuDNN batch: noted."""
    assert "torch.nn.CTCLoss" in torch.use_deterministic_algorithms.__doc__
    native = _cudnn_batch(targets=np.array([1, 2, 3, 4, 5, 1, 2, 3]))
    torch.use_deterministic_algorithms(True)
    try:
        report = torch_path(**native)
    finally:
        torch.use_deterministic_algorithms(False)
    assert report.path == "native" and "would raise RuntimeError" in report.differences[0]
    with torch.backends.cudnn.flags(enabled=True, deterministic=False):
        report = torch_path(**_cudnn_batch())
    assert report.path == "cudnn" and "nondeterministic algorithm" in report.differences[0]
