"""The fault models of ``ctcbench.caselib.faults``: the correct one against brute force, each
fault's loss and gradient against a CTC loss written apart with that fault planted
(tests/function/faulty_losses.py), and every gradient against central differences of the
model's own loss."""
import importlib.util
from pathlib import Path

import numpy as np
import pytest

from conftest import random_problem
from ctcbench.caselib.faults import (BY_KEY, CORRECT, FAULTS, FLOAT32_LOWEST, Evaluator, Inputs,
                                     Model)
from ctcbench.core.oracles import brute_force
from ctcbench.core.problem import CTCProblem

PLANTED = Path(__file__).parent.parent / "function" / "faulty_losses.py"
_spec = importlib.util.spec_from_file_location("faulty_losses", PLANTED)
planted = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(planted)

# the form of each fault the planted code has, where a fault has several
FORM = {"log_zero": "float32's lowest", "zero_length": "all T frames",
        "empty_target": "its one state counted twice (loss too small by log 2)",
        "nan_softmax": "at those entries"}


def problems(seed: int, count: int = 12):
    """Small random problems with every edge the faults need: repeats, empty targets, zero
    input lengths, infeasible targets, padding, a blank other than 0 and C - 1."""
    rng = np.random.default_rng(seed)
    out = []
    for i in range(count):
        C = int(rng.integers(3, 6))
        p = random_problem(rng, T=6, N=4, C=C, L=3, blank=int(rng.integers(C)), garbage=False,
                           feasible=i % 3 != 0)
        lengths = p.input_lengths.copy()
        lengths[0] = 0 if i % 4 == 0 else lengths[0]
        targets = p.targets.copy()
        targets[1, :2] = [k for k in range(C) if k != p.blank][0]  # a repeated label
        tl = p.target_lengths.copy()
        tl[1] = max(tl[1], 2)
        logits = np.array(p.logits)
        logits[1, 3, p.blank] = -np.inf  # a probability of 0: a division by it is NaN
        out.append(CTCProblem(logits, targets, lengths, tl, blank=p.blank))
    return out


def test_the_correct_model_is_brute_force():
    """Loss -log sum over every path that collapses to the target, per sample, and its
    gradient."""
    for p in problems(1):
        ev = Evaluator(p)
        for n in range(p.shape[1]):
            T_n, L_n = int(p.input_lengths[n]), int(p.target_lengths[n])
            if T_n == 0:
                continue
            want, want_grad = brute_force(p.logits[:T_n, n].astype(np.float64),
                                          p.targets[n, :L_n], blank=p.blank)
            got = ev.result(CORRECT, n)
            assert (got.loss == want == np.inf) or abs(got.loss - want) < 1e-9, (got, want)
            np.testing.assert_allclose(got.grad[:T_n], want_grad, atol=1e-9)
            assert not got.grad[T_n:].any()  # padded frames: no gradient


@pytest.mark.parametrize("key", [f.key for f in FAULTS])
def test_each_fault_model_is_the_loss_with_that_fault_planted(key):
    """On every sample where the fault can show, the model's loss (and its gradient, where it
    defines one) is what the planted implementation returns for the logits it was handed."""
    fault = BY_KEY[key]
    forms = [form for form, _ in fault.forms]
    form = forms.index(FORM.get(key, forms[0]))
    planted_loss = getattr(planted, f"ctc_loss_{key}")
    shown = 0
    for p in problems(2):
        written = np.array(p.logits, np.float64)  # padded frames hold random logits
        ev = Evaluator(p, [Inputs(written, np.asarray(p.targets))])
        loss, grad = planted_loss(written, p.targets.copy(), p.input_lengths,
                                  p.target_lengths, blank=p.blank)
        for n in range(p.shape[1]):
            if not fault.shows(ev.sample(n)):
                continue
            shown += 1
            got = ev.fault_results(fault, n)[form][1]
            assert got.loss == pytest.approx(loss[n], rel=1e-9, abs=1e-9) or (
                np.isnan(got.loss) and np.isnan(loss[n])), (n, got.loss, loss[n])
            if got.grad is not None:
                np.testing.assert_allclose(got.grad, grad[:, n], atol=1e-9)
    assert shown, f"no sample shows {key}"


def test_an_impossible_target_with_a_finite_log_zero_scores_minus_that_number():
    """float32's lowest as log(0): the infeasible sample's loss is 3.4028235e38, not inf."""
    p = CTCProblem(np.zeros((2, 1, 3)), [[1, 1]], [2], [2])  # needs 3 frames
    got = Evaluator(p).result(Model(log_zero=FLOAT32_LOWEST), 0)
    assert got.loss == -FLOAT32_LOWEST and got.grad is None
    assert Evaluator(p).result(CORRECT, 0).loss == np.inf


def test_the_empty_target_read_twice_is_log_2_below():
    """One state summed twice doubles P(empty): the loss drops by exactly log 2."""
    rng = np.random.default_rng(3)
    p = CTCProblem(rng.normal(size=(4, 1, 3)), np.zeros((1, 1), int), [4], [0])
    ev = Evaluator(p)
    right = -np.log(np.exp(p.log_probs()[:, 0, 0]).prod())  # every frame blank
    assert ev.result(CORRECT, 0).loss == pytest.approx(right, abs=1e-12)
    assert ev.result(BY_KEY["empty_target"].forms[0][1], 0).loss == pytest.approx(
        right - np.log(2), abs=1e-12)


@pytest.mark.parametrize("key", [f.key for f in FAULTS
                                 if f.key not in ("batch_sum", "log_zero", "grad_log_probs",
                                                  "nan_softmax")])
def test_each_model_gradient_is_its_loss_differenced(key):
    """The gradient a model gives is the central difference of its own loss, on every frame
    it reads (the padded ones too, where it reads them)."""
    fault = BY_KEY[key]
    model = fault.forms[0][1]
    h = 1e-6
    for p in problems(4, count=4):
        x = np.array(p.logits, np.float64)
        targets = np.asarray(p.targets)
        ev = Evaluator(p, [Inputs(x, targets)])
        for n in range(p.shape[1]):
            got = ev.result(model, n)
            if not fault.shows(ev.sample(n)) or not np.isfinite(got.loss):
                continue
            fd = np.zeros_like(got.grad)
            for t in range(x.shape[0]):
                for c in range(x.shape[2]):
                    up, down = x.copy(), x.copy()
                    up[t, n, c] += h
                    down[t, n, c] -= h
                    fd[t, c] = (Evaluator(p, [Inputs(up, targets)]).result(model, n).loss
                                - Evaluator(p, [Inputs(down, targets)]).result(model, n).loss
                                ) / (2 * h)
            np.testing.assert_allclose(got.grad, fd, atol=1e-6)
