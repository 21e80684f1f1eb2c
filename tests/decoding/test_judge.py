"""The judge names each planted fault, and passes ctcbench's own decoders on every case."""
import re

import pytest

from ctcbench.caselib.decoder_cases import load_decoder_cases
from ctcbench.caselib.decoder_check import check_decoder_case
from ctcbench.runtime.decoders import LoadedDecoder, DecoderTraits, get_decoder
from ctcbench.runtime.status import Status

from tests.decoding import faulty_decoders as faulty

CASES = {c.name: c for c in load_decoder_cases()}


def _row(impl, case):
    return check_decoder_case(LoadedDecoder(type(impl).__name__, impl, DecoderTraits.of(impl)),
                              CASES[case])


@pytest.mark.parametrize("name", ["greedy", "beam", "viterbi"])
def test_our_decoders_pass_every_case(name):
    decoder = get_decoder(name)
    for case in CASES.values():
        row = check_decoder_case(decoder, case)
        assert row["status"] == Status.OK, (case.name, row["reason"])


@pytest.mark.parametrize("impl, case, words", [
    (faulty.EmptyGreedy(), "blank_first_and_last", "empty output"),
    (faulty.BlankKeptGreedy(), "blank_first_and_last", "the blank (class 0) left in"),
    (faulty.BlanksFirstGreedy(), "repeat_across_blank", "repeats merged across a blank"),
    (faulty.BlanksFirstGreedy(), "abccd_merged_after_blank_removal",
     "repeats merged across a blank"),
    (faulty.NoMergeGreedy(), "repeat_without_blank", "repeats not merged"),
    (faulty.LastClassBlankGreedy(), "blank_first_and_last", "class 2 treated as the blank"),
    (faulty.PaddingReadingGreedy(), "ragged_lengths", "padding read as frames"),
    (faulty.DoubleMergeBeam(), "repeat_across_blank", "repeats merged across a blank"),
    (faulty.OverScoringBeam(), "random_small", "scored"),
    (faulty.ShiftedLabelsBeam(), "blank_first_and_last", "labels shifted by -1"),
])
def test_each_planted_fault_is_named(impl, case, words):
    row = _row(impl, case)
    assert row["status"] == Status.MISMATCH
    assert words in row["reason"], row["reason"]


def test_a_fault_is_not_seen_where_it_changes_nothing():
    # no repeat and no blank between labels: merging order cannot matter
    assert _row(faulty.BlanksFirstGreedy(), "all_blank")["status"] == Status.OK


def test_a_class_the_frames_never_use_is_not_blamed_as_the_blank():
    import numpy as np
    from ctcbench.caselib.decoder_judge import name_fault
    from ctcbench.core.ctcmath import log_softmax
    lp = log_softmax(np.array([[0, 5, 0, 0], [5, 0, 0, 0], [0, 0, 5, 0]], dtype=float))
    # the argmax path is 1 _ 2; class 3 never wins a frame
    assert name_fault((1, 0, 2), (1, 2), lp, 0).startswith("the blank (class 0) left in")


def test_hand_answers_of_the_case_files_agree_with_brute_force():
    from ctcbench.caselib.library import load_cases
    from ctcbench.core.ctcmath import collapse
    from ctcbench.core.decoding import most_probable
    for case in CASES.values():
        for n, lp in enumerate(case.samples):
            if case.labels and case.labels[n] is not None and lp.shape[1] ** len(lp) < 10 ** 6:
                assert case.labels[n] in most_probable(lp, blank=case.blank)[0], case.name
            if case.greedy and case.greedy[n] is not None:
                assert collapse(lp.argmax(1), blank=case.blank) == case.greedy[n], case.name
    assert not set(CASES) & {c.name for c in load_cases()}  # a name selects one library's case


@pytest.mark.parametrize("infeasible, target, words", [
    (True, [1, 1], "labels with no path in its 3 frames (infeasible = true), got [1, 1]"),
    (False, [1, 1, 1], "labels with a path in its 3 frames, got [1, 1, 1]"),
    ("yes", [1, 1, 1], "sample[0].infeasible: expected true or false, got 'yes'"),
])
def test_a_target_declared_infeasible_must_have_no_path(infeasible, target, words):
    """A case's word on a target's feasibility is checked as it loads (minimal_path)."""
    from ctcbench.caselib.decoder_cases import parse_decoder_case
    raw = {"name": "x", "description": "d", "provenance": "p",
           "sample": [{"probs": [[0.5, 0.5]] * 3, "target": target}]}
    if infeasible is not False:
        raw["sample"][0]["infeasible"] = infeasible
    with pytest.raises(ValueError, match=re.escape(words)):
        parse_decoder_case(raw, family="f", source="f.toml")
