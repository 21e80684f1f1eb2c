"""check_aligner and `doctor FILE --aligner`: a user's forced aligner, run sample by sample
(in a worker for a "pkg.mod:name"), held to the exact best path of each target; crashes,
refusals and wrong paths each named. The right paths come from brute force over every path
of the target (itertools.product), not from ctcbench's recursion."""
import itertools

import numpy as np
import pytest
from click.testing import CliRunner

from ctcbench import check_aligner
from ctcbench.cli import cli
from ctcbench.runtime.decoders import unregister_decoder
from tests.decoding import user_functions as U

MOD = "tests.decoding.user_functions"
RNG = np.random.default_rng(11)
N, T, C = 6, 5, 4
LOGITS = RNG.normal(size=(T, N, C)) * 2  # (T, N, C)
TARGETS = np.array([[1, 2, 3, 1, 2], [1, 1, 0, 0, 0], [1, 1, 1, 0, 0], [2, 3, 0, 0, 0],
                    [0, 0, 0, 0, 0], [3, 0, 0, 0, 0]])
TARGET_LENGTHS = np.array([5, 2, 3, 2, 0, 1])  # sample 0: T == L; sample 2: no path in 4
LENGTHS = np.array([5, 5, 4, 3, 5, 2])


def best_by_brute_force(lp, target, blank=0):
    """The best log-probability of a path of len(lp) frames that B maps to target."""
    best = -np.inf
    for path in itertools.product(range(lp.shape[1]), repeat=len(lp)):
        if [k for k, _ in itertools.groupby(path) if k != blank] == list(target):
            best = max(best, sum(lp[t, k] for t, k in enumerate(path)))
    return best


def test_a_right_aligner_passes_and_refusals_are_said():
    found = check_aligner(U.viterbi, LOGITS, TARGETS, LENGTHS, TARGET_LENGTHS)
    assert found.ok, found.findings
    assert found.summary() == ("aligner agrees with the best path on all 6 samples (1 of them "
                               "targets with no path, refused as they must be)")
    lp = LOGITS - np.log(np.exp(LOGITS).sum(-1, keepdims=True))
    for s in found.samples:  # the oracle the judge stands for, recomputed by brute force
        n = s["sample"]
        if s["path"] is not None:
            frames = lp[:LENGTHS[n], n]
            got = sum(frames[t, k] for t, k in enumerate(s["path"]))
            assert got == pytest.approx(best_by_brute_force(frames, s["target"]), abs=1e-9)


def test_crashes_in_the_worker_are_findings_naming_the_sample():
    try:
        found = check_aligner(f"{MOD}:segfault_when_full", LOGITS, TARGETS, LENGTHS,
                              TARGET_LENGTHS)
    finally:
        unregister_decoder(f"{MOD}:segfault_when_full")
    assert not found.ok and len(found.findings) == 1
    assert found.findings[0].startswith("crashed (the worker died of SIGSEGV) in 1 of 6 "
                                        "samples (first: sample 0, T=5, L=5:")
    assert [s["fault"] is None for s in found.samples] == [False, True, True, True, True, True]


def test_each_aligner_fault_is_named():
    blank_last = np.where(TARGETS == 3, 2, TARGETS)  # labels 1, 2 only: the blank is 3
    zeros = check_aligner(U.zeros_for_empty, LOGITS, blank_last, LENGTHS, TARGET_LENGTHS,
                          blank=3)
    assert zeros.findings == ["class 0 in every frame for an empty target, not the blank (3) in "
                              "1 of 6 samples (first: sample 4, class 0 in every frame for an "
                              "empty target, not the blank (3): the path collapses to [0], not "
                              "the target [])"]

    def aligns_anything(log_probs, target, *, blank):  # never refuses
        return [[blank] * len(log_probs), 0.0]
    anything = check_aligner(aligns_anything, LOGITS, TARGETS, LENGTHS, TARGET_LENGTHS)
    said = " | ".join(anything.findings)
    assert "expected a refusal (an exception)" in said and "sample 2" in said


def test_bad_targets_are_one_line():
    with pytest.raises(ValueError, match=r"targets: expected labels in \[0, 4\) other than the "
                                         r"blank \(0\), got sample 0: \[0, 1\]"):
        check_aligner(U.viterbi, LOGITS, np.array([[0, 1]] * N))
    with pytest.raises(ValueError, match=r"score: expected path or none"):
        check_aligner(U.viterbi, LOGITS, np.ones((N, 1), dtype=int), score="labelling")


def test_the_command(tmp_path, monkeypatch):
    (tmp_path / "myalign.py").write_text(
        "import os, signal\n"
        "from tests.decoding.user_functions import viterbi\n"
        "def align(log_probs, target, *, blank):\n"
        "    if len(target) == len(log_probs):\n"
        "        os.kill(os.getpid(), signal.SIGSEGV)\n"
        "    return viterbi(log_probs, target, blank=blank)\n")
    np.savez(tmp_path / "batch.npz", logits=LOGITS, targets=TARGETS,
             input_lengths=LENGTHS, target_lengths=TARGET_LENGTHS)
    monkeypatch.syspath_prepend(str(U.__file__).rsplit("/tests/", 1)[0])
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(cli, ["doctor", "batch.npz", "--aligner", "myalign:align"])
    unregister_decoder("myalign:align")
    assert out.exit_code == 1, out.output
    assert out.output.startswith("aligner differs from the best path on 1 of 6 samples\n"
                                 "  - crashed (the worker died of SIGSEGV)"), out.output
    both = CliRunner().invoke(cli, ["doctor", "batch.npz", "--aligner", "myalign:align",
                                    "--decoder", "x:y"])
    assert "--decoder: expected no other check with --aligner, got --aligner" in both.output
    missing = CliRunner().invoke(cli, ["doctor", "batch.npz", "--aligner", "myalign:nope"])
    assert "--aligner: expected a function 'nope' in myalign" in missing.output
