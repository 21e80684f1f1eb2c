"""``ctcbench.caselib.fault_match``: a function's numbers held against the fault models. The
function's numbers here come from brute force (``ctcbench.core.oracles``) with the fault
applied by hand, so what each sample must say is known without the models."""
import numpy as np

from ctcbench.caselib.fault_match import judge_samples, name_causes
from ctcbench.caselib.judge import DEFAULT_TOLERANCES
from ctcbench.core.oracles import brute_force
from ctcbench.core.problem import CTCProblem

TOL = DEFAULT_TOLERANCES["float64"]


def problem():
    """Four samples: targets of 1, 2, 3 and 0 labels, all feasible, blank 0."""
    rng = np.random.default_rng(7)
    targets = [[1, 2, 0], [2, 1, 0], [1, 2, 1], [0, 0, 0]]
    return CTCProblem(rng.normal(size=(6, 4, 3)), targets, [6, 5, 6, 4], [1, 2, 3, 0])


def brute(p):
    """``(loss (N,), grad (T, N, C))`` by enumerating every path."""
    T, N, C, _ = p.shape
    loss, grad = np.zeros(N), np.zeros((T, N, C))
    for n in range(N):
        T_n, L_n = int(p.input_lengths[n]), int(p.target_lengths[n])
        loss[n], grad[:T_n, n] = brute_force(p.logits[:T_n, n], p.targets[n, :L_n])
    return loss, grad


def test_right_numbers_fail_no_sample_and_contradict_every_fault_that_shows():
    """The brute-force answer: nothing fails; a fault that would change a sample's answer is
    ruled out by it."""
    p = problem()
    verdicts = judge_samples(p, *brute(p), TOL)
    assert [v.failing for v in verdicts] == [False] * 4
    assert not any(v.explained for v in verdicts)
    assert "per_target" in verdicts[[v.sample for v in verdicts].index(2)].contradicted
    assert "per_target" not in verdicts[[v.sample for v in verdicts].index(0)].contradicted


def test_a_loss_divided_by_the_target_length_is_explained_by_that_fault():
    """Samples with two or more labels fail, and only the target-length fault explains them
    (one label: dividing by 1 changes nothing, so that sample passes)."""
    p = problem()
    loss, grad = brute(p)
    lengths = np.maximum(p.target_lengths, 1)
    verdicts = {v.sample: v for v in judge_samples(p, loss / lengths,
                                                   grad / lengths[None, :, None], TOL)}
    assert {n for n, v in verdicts.items() if v.failing} == {1, 2}
    assert verdicts[1].explained == {"per_target": ""} == verdicts[2].explained
    assert not verdicts[0].explained and "per_input" in verdicts[0].contradicted


def test_the_failing_samples_come_first_and_the_limit_holds():
    """Up to ``limit`` samples are looked at, a failing one before any that passed."""
    p = problem()
    loss, grad = brute(p)
    loss[3] += 1.0  # the empty target's loss wrong by a number no fault gives
    verdicts = judge_samples(p, loss, grad, TOL, limit=2)
    assert [v.sample for v in verdicts][0] == 3 and len(verdicts) == 2
    assert verdicts[0].failing and not verdicts[0].explained


def test_a_cause_is_named_when_it_explains_a_clear_majority_and_nothing_rules_it_out():
    """Named with its count; not when ruled out, when it explains too few, or when nothing
    failed."""
    failing = [f"s{i}" for i in range(6)]
    repeats = {f"s{i}": "" for i in range(5)}
    named = name_causes(failing, {"repeats": repeats}, {})
    assert [c.fault.key for c in named] == ["repeats"]
    assert named[0].line() == ("repeated labels: your loss lets a label follow itself without "
                               "a blank (matches on 5 of 6 failing samples)")
    assert name_causes(failing, {"repeats": repeats}, {"repeats": 1}) == []  # ruled out
    assert name_causes(failing, {"repeats": {"s0": "", "s1": ""}}, {}) == []  # 2 of 6: no
    assert name_causes([], {}, {}) == []  # nothing failed (right code): nothing named


def test_two_faults_on_different_samples_are_both_named_each_with_its_count():
    """Greedy: the one explaining most first; a second only for samples the first leaves;
    a fault whose samples the first already explains is not named."""
    failing = [f"s{i}" for i in range(10)]
    explained = {"log_zero": {f"s{i}": "float32's lowest" for i in range(7)},
                 "zero_length": {"s7": "all T frames", "s8": "all T frames"},
                 "per_input": {"s1": "", "s2": ""}}
    named = name_causes(failing, explained, {})
    assert [(c.fault.key, c.explained, c.failing) for c in named] == [
        ("log_zero", 7, 10), ("zero_length", 2, 10)]
    assert "(float32's lowest)" in named[0].line()
