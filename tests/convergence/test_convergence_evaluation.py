"""Held-out scoring, on a stand-in model whose every output frame is chosen by hand."""
import numpy as np
import pytest
import torch

from ctcbench.convergence.data import Pool
from ctcbench.convergence.evaluation import decode_outputs, evaluate

# charset "ab": class 0 is the blank, 1 is "a", 2 is "b"; one argmax path per line
PATHS = [[1, 0, 2, 2],  # reads "ab": right
         [0, 2, 0, 0]]  # reads "b" for "a": one substitution


class HandModel(torch.nn.Module):
    """A CTC model whose frames put 5.0 on the class of ``PATHS[line]``; the line is the
    value its image is filled with."""

    ctc = True

    def forward(self, x):  # x: (N, 1, H, W)
        lines = x[:, 0, 0, 0].long().tolist()
        out = torch.zeros(4, len(lines), 3)  # (T, N, C)
        for n, line in enumerate(lines):
            out[torch.arange(4), n, torch.tensor(PATHS[line])] = 5.0
        return out


def _pool():
    images = np.stack([np.full((2, 3), i, dtype=np.float32) for i in range(2)])
    return Pool(images, np.array([[1, 2], [1, 0]]), np.array([2, 1]), "ab")


def first_length_loss(logits, targets, input_lengths, target_lengths):
    return target_lengths[0].double()


@pytest.mark.parametrize("batch_size", [1, 2])
def test_evaluate_by_hand(batch_size):
    """Line 0 read right, line 1 with one substitution: CER 1/3 (one edit over three
    characters), sequence accuracy 1/2, blank fraction 4/8 frames, 1.5 characters emitted;
    the loss is each batch's weighted by its lines ((2 + 1) / 2 one line at a time)."""
    got = evaluate(HandModel(), first_length_loss, _pool(), batch_size=batch_size)
    assert got["cer"] == pytest.approx(1 / 3) and got["seq_acc"] == 0.5
    assert got["blank_frac"] == 0.5 and got["emitted"] == 1.5 and got["example"] == "ab"
    assert got["test_loss"] == (1.5 if batch_size == 1 else 2.0)


def test_beam_search_reads_the_same_paths():
    """With one dominant class per frame, a beam of 4 reads what greedy reads."""
    model = HandModel()
    out = model(torch.from_numpy(_pool().images).unsqueeze(1))
    assert decode_outputs(model, out, beam=4) == decode_outputs(model, out) == [(1, 2), (2,)]


def test_per_position_outputs_drop_the_no_character_class():
    """The non-CTC baseline: argmax per position, class 0 (no character) dropped; repeats
    are kept (no CTC collapsing)."""
    model = torch.nn.Module()
    model.ctc = False
    out = torch.zeros(2, 3, 3)  # (N, max_len, C)
    out[0, [0, 1, 2], [1, 1, 0]] = 1.0
    out[1, [0, 1, 2], [0, 2, 0]] = 1.0
    assert decode_outputs(model, out) == [(1, 1), (2,)]
