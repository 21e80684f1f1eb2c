"""Transformers' CTC tokenizer decode (``Wav2Vec2CTCTokenizer``/``Wav2Vec2Processor``
``batch_decode``) as a decoder: against CTC's collapse written out here (merge runs, then drop
the blank), texts worked out by hand, and the decoder case library's brute-force answers; its
conventions named as notes, its fault (``skip_special_tokens=True``) found."""
from __future__ import annotations

import functools
import itertools

import numpy as np
import pytest

pytest.importorskip("transformers")

from ctcbench import check_decoder
from ctcbench.caselib.decoder_cases import load_decoder_cases
from ctcbench.caselib.decoder_check import check_decoder_case
from ctcbench.runtime.decoders import get_decoder
from ctcbench.transformers.tokenizer import check_tokenizer, tokenizer_from_vocab

VOCAB = {"<pad>": 0, "H": 1, "E": 2, "L": 3, "O": 4, "|": 5}  # a wav2vec2-style vocabulary


def _collapse(path, blank):
    """CTC's map, as the papers state it: one of each run, then no blanks."""
    return tuple(k for k, _ in itertools.groupby(path) if k != blank)


def _strip(labels, delimiter):
    labels = list(labels)
    while labels and labels[0] == delimiter:
        labels.pop(0)
    while labels and labels[-1] == delimiter:
        labels.pop()
    return tuple(labels)


def _logits(paths, C):
    """``(N, T, C)`` logits whose argmax is ``paths (N, T)``."""
    return np.where(np.eye(C, dtype=bool)[np.asarray(paths)], 4.0, 0.0)


@pytest.fixture(scope="module")
def processor():
    from transformers import Wav2Vec2FeatureExtractor, Wav2Vec2Processor
    return Wav2Vec2Processor(feature_extractor=Wav2Vec2FeatureExtractor(),
                             tokenizer=tokenizer_from_vocab(VOCAB))


# "hello world" as a model emits it: the double L apart by a blank, the words by "|"
HELLO = [1, 1, 2, 0, 3, 3, 0, 3, 4, 5, 5, 0, 4, 4, 3]


def test_batch_decode_texts_are_the_ones_worked_out_by_hand(processor):
    """Merged runs, the blank dropped, "|" as a space, stripped ends; skip_special_tokens and
    group_tokens=False as their code says (read, not run, to get these)."""
    assert processor.batch_decode([HELLO]) == ["HELLO OL"]
    assert processor.batch_decode([[5, 1, 0, 5, 2, 5]]) == ["H E"]
    assert processor.batch_decode([HELLO], skip_special_tokens=True) == ["HELO OL"]
    assert processor.batch_decode([[1, 1, 0, 1]], group_tokens=False) == ["HHH"]


def test_a_processor_with_its_defaults_is_ctc_greedy(processor):
    """check_decoder on the processor itself: the collapse, no finding; the blank is the pad
    token's id without being told."""
    found = check_decoder(processor, _logits([HELLO], 6), layout="NTC")
    assert found.ok and found.judged == 1, found.format_table()
    assert found.samples[0]["got"] == list(_collapse(HELLO, 0)) == [1, 2, 3, 3, 4, 5, 4, 3]


def test_the_word_delimiter_at_an_end_is_a_convention_not_a_fault(processor):
    """A labelling that starts and ends with "|": the text loses them (strip); a note naming
    replace_word_delimiter_char, no finding; the labels are the stripped collapse."""
    path = [5, 1, 0, 5, 2, 5]
    found = check_tokenizer(processor, _logits([path], 6))
    assert found.ok, found.format_table()
    assert found.samples[0]["got"] == list(_strip(_collapse(path, 0), 5)) == [1, 5, 2]
    assert any("replace_word_delimiter_char" in n and "convention" in n for n in found.notes)


def test_group_tokens_false_is_a_convention_with_its_setting(processor):
    """group_tokens=False keeps runs: a note naming group_tokens=True, not a finding."""
    path = [1, 1, 0, 3, 3]
    found = check_tokenizer(processor, _logits([path], 6), group_tokens=False)
    assert found.ok and found.samples[0]["got"] == [1, 1, 3, 3]
    assert any("group_tokens=True" in n for n in found.notes), found.notes


def test_skip_special_tokens_merges_repeats_across_the_blank_and_is_found(processor):
    """skip_special_tokens=True drops the pad before grouping: HELLO's double L is one. A
    finding naming the setting and the fault; the labels are those of dropping the blank
    first, then merging (written out here)."""
    found = check_tokenizer(processor, _logits([HELLO], 6), skip_special_tokens=True)
    assert not found.ok
    no_blank_first = tuple(k for k, _ in itertools.groupby(k for k in HELLO if k != 0))
    assert found.samples[0]["got"] == list(no_blank_first) != list(_collapse(HELLO, 0))
    assert "skip_special_tokens=True" in found.findings[0]
    assert any(f.startswith("repeats merged across a blank") for f in found.findings)


def test_a_blank_that_is_not_the_pad_token_is_named_with_the_parameter(processor):
    """The model's blank said to be class 5 while the tokenizer's pad is 0: a finding naming
    blank=0 and pad_token."""
    found = check_tokenizer(processor, _logits([HELLO], 6), blank=5)
    assert not found.ok and "blank=0" in found.findings[0] and "pad_token" in found.findings[0]


def test_lengths_cut_each_sample_and_time_major_is_read(processor):
    """A short sample's padding frames (which spell O) are not decoded; (T, N, C) with
    layout='TNC' gives the same answers."""
    paths = np.array([[1, 0, 2, 4, 4], [3, 0, 3, 0, 0]])
    lengths = [2, 5]
    want = [list(_collapse(p[:n], 0)) for p, n in zip(paths, lengths)]
    batch = check_tokenizer(processor, _logits(paths, 6), lengths)
    time_major = check_tokenizer(processor, _logits(paths, 6).transpose(1, 0, 2), lengths,
                                 layout="TNC")
    assert [s["got"] for s in batch.samples] == [s["got"] for s in time_major.samples] == want


@pytest.mark.parametrize("seed", range(3))
def test_the_adapter_is_the_collapse_of_the_argmax_for_any_blank(seed):
    """transformers-ctc on random frames, any blank index, ragged lengths: each sample's
    labels are the collapse of its argmax (ties impossible: continuous values)."""
    rng = np.random.default_rng(seed)
    decoder = get_decoder("transformers-ctc")
    for _ in range(5):
        T, N, C = int(rng.integers(1, 12)), int(rng.integers(1, 4)), int(rng.integers(2, 30))
        blank = int(rng.integers(0, C))
        lp = rng.normal(size=(T, N, C)) * 3
        lengths = rng.integers(0, T + 1, size=N)
        hyps = decoder.decode(lp, lengths, blank=blank)
        for n in range(N):
            assert hyps[n][0].labels == _collapse(lp[:lengths[n], n].argmax(-1), blank)


def _predicted_failures(transform) -> set[str]:
    """The decoder cases where ``transform(argmax path, blank, C)`` differs, on some sample,
    from the collapse of the sample's argmax (every case's greedy answer)."""
    out = set()
    for case in load_decoder_cases():
        for lp in case.samples:
            path = lp.argmax(1)
            if transform(path, case.blank, case.C) != _collapse(path, case.blank):
                out.add(case.name)
    return out


def _rows(name):
    decoder = get_decoder(name)
    return {c.name: check_decoder_case(decoder, c)["status"] for c in load_decoder_cases()}


def test_on_the_decoder_cases_defaults_pass_and_conventions_fail_only_where_predicted():
    """The case library: transformers-ctc passes every case; -words and -skip-special fail
    exactly on the cases their behaviour, applied here to the argmax path, predicts (each then
    ``known``, with the reason in cases/known_issues.toml), and pass all others."""
    defaults = _rows("transformers-ctc")
    assert set(defaults.values()) == {"ok"}, defaults

    def words(path, blank, C):
        delimiter = [k for k in range(C) if k != blank][-1]
        return _strip(_collapse(path, blank), delimiter)

    def skip(path, blank, C):
        return tuple(k for k, _ in itertools.groupby(k for k in path if k != blank))

    for name, transform in (("transformers-ctc-words", words),
                            ("transformers-ctc-skip-special", skip)):
        rows = _rows(name)
        predicted = _predicted_failures(transform) & set(rows)
        assert predicted, name  # the library holds cases that tell
        assert {c for c, status in rows.items() if status != "ok"} == predicted, (name, rows)
        assert {rows[c] for c in predicted} == {"known"}, rows


def test_a_plain_function_is_not_taken_for_a_tokenizer():
    """A partial of some other function is called as the user's decoder, not unwrapped."""
    def decode(values, lengths, *, blank):
        return [list(_collapse(v.argmax(-1), blank)) for v in values]
    found = check_decoder(functools.partial(decode, blank=0), _logits([[1, 0, 1]], 3),
                          layout="NTC")
    assert found.ok and found.samples[0]["got"] == [1, 1]
