"""ctcbench.doctor.explain: perfect vs all-blank losses under each convention, checked by
brute-force path enumeration; the FSDL puzzle (seed 000) is reproduced and attributed."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

from ctcbench.doctor.explain import explain_perfect_vs_blank
from ctcbench.core.ctcmath import collapse
from ctcbench.core.oracles import brute_force

from conftest import random_problem, spike_paths

Q = 0.99  # confidence of the constructed predictions


def _brute_raw(scores: np.ndarray, target, blank: int = 0) -> float:
    """-log sum over paths collapsing to target of exp(sum of scores): no normalisation."""
    T, C = scores.shape
    totals = [scores[np.arange(T), p].sum() for p in itertools.product(range(C), repeat=T)
              if collapse(p, blank=blank) == tuple(target)]
    return float(-np.logaddexp.reduce(totals))


def _confident(path, C):
    probs = np.full((len(path), C), (1 - Q) / (C - 1))
    probs[np.arange(len(path)), path] = Q
    return probs


def test_tiny_case_matches_brute_force_for_every_scenario():
    """T=5, C=3, targets [1,1] and [1]: every row equals a brute-force enumeration of the
    predictions built by hand (spikes at frames 1, 3 and at frame 2)."""
    T, C = 5, 3
    targets = np.array([[1, 1], [1, 0]])
    kw = dict(targets=targets, input_lengths=np.array([T, T]), target_lengths=np.array([2, 1]))
    exp = explain_perfect_vs_blank(np.log(np.full((T, 2, C), 1 / C)), **kw, confidence=Q)
    rows = {s.name: s for s in exp.scenarios}
    perfect = [_confident([0, 1, 0, 1, 0], C), _confident([0, 0, 1, 0, 0], C)]
    blank = _confident([0] * T, C)
    ys = [[1, 1], [1]]

    def mean(f, preds):
        return np.mean([f(p, y) for p, y in zip(preds, ys)])

    expected = {
        "correct": lambda p, y: brute_force(np.log(p), y)[0],
        "probs as log_probs": lambda p, y: _brute_raw(p, y),
        "raw scores as log_probs":
            lambda p, y: _brute_raw(np.log(p) - np.log(p).mean(-1, keepdims=True), y),
        "double softmax": lambda p, y: brute_force(p, y)[0],
    }
    for name, f in expected.items():
        assert rows[name].loss_perfect == pytest.approx(mean(f, perfect), rel=1e-9), name
        assert rows[name].loss_all_blank == pytest.approx(mean(f, [blank, blank]), rel=1e-9), name
    # The model's blank at C-1 = 2: predictions built with blank 2, the loss with blank 0.
    other = rows["blank 2 in the model"]
    p2 = [_confident([2, 1, 2, 1, 2], C), _confident([2, 2, 1, 2, 2], C)]
    b2 = _confident([2] * T, C)
    assert other.loss_perfect == pytest.approx(mean(lambda p, y: brute_force(np.log(p), y)[0], p2))
    assert other.loss_all_blank == pytest.approx(
        mean(lambda p, y: brute_force(np.log(p), y)[0], [b2, b2]))
    assert not rows["correct"].inverted and rows["correct"].yours


def test_fsdl_softmax_outputs_invert_the_ordering_and_are_attributed(rng):
    """Seed 000: with softmax outputs passed as log_probs, all-blank scores better than the
    perfect prediction; the row is marked as the user's and the correct row is not inverted."""
    p = random_problem(rng, T=60, N=6, C=30, L=6, full_length=True, garbage=False)
    onehot = np.eye(30)[spike_paths(p)]  # (T, N, C): the user's 'perfect' softmax output
    exp = explain_perfect_vs_blank(onehot, targets=p.targets, input_lengths=p.input_lengths,
                                   target_lengths=p.target_lengths)
    rows = {s.name: s for s in exp.scenarios}
    assert rows["probs as log_probs"].yours and rows["probs as log_probs"].inverted
    assert not rows["correct"].inverted and not rows["correct"].yours
    assert "probabilities-not-log" in exp.summary["findings"]
    table = exp.format_table()
    assert "INVERTED  <- your inputs" in table


@pytest.mark.parametrize("seed", range(4))
def test_correct_conventions_never_invert(seed):
    """Under the correct conventions the perfect prediction beats all-blank for any shape."""
    rng = np.random.default_rng(seed)
    for _ in range(5):
        T, C = int(rng.integers(4, 80)), int(rng.integers(3, 40))
        p = random_problem(rng, T=T, N=4, C=C, L=int(rng.integers(1, T // 2 + 1)),
                           full_length=True, garbage=False)
        if not (p.target_lengths > 0).any():
            continue
        exp = explain_perfect_vs_blank(p.log_probs(), targets=p.targets,
                                       input_lengths=p.input_lengths,
                                       target_lengths=p.target_lengths)
        assert not exp.scenarios[0].inverted and exp.scenarios[0].name == "correct"


def test_unusable_inputs_raise_clear_errors():
    """No non-empty feasible target, too few classes, or a bad confidence: one clear error."""
    kw = dict(input_lengths=np.array([1]), target_lengths=np.array([2]))
    with pytest.raises(ValueError, match="targets: expected at least one non-empty target"):
        explain_perfect_vs_blank(np.zeros((1, 1, 4)), targets=np.array([[1, 1]]), **kw)
    with pytest.raises(ValueError, match="expected at least 3 classes"):
        explain_perfect_vs_blank(np.zeros((1, 1, 2)), targets=np.array([[1, 1]]), **kw)
    with pytest.raises(ValueError, match="confidence: expected a probability"):
        explain_perfect_vs_blank(np.zeros((1, 1, 4)), targets=np.array([[1, 1]]), **kw,
                                 confidence=1.0)
