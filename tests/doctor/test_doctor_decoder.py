"""check_decoder and `doctor FILE --decoder`: a user's decoder with a bug is named by cause.

The right answers here are written out independently (itertools.groupby over the argmax, the
definition of the map B), not read from ctcbench's own decoders."""
import itertools
import textwrap

import numpy as np
import pytest
from click.testing import CliRunner

from ctcbench import check_decoder
from ctcbench.cli import cli

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(7)
N, T, C = 6, 16, 5
PROBS = torch.softmax(torch.tensor(RNG.normal(size=(N, T, C)) * 3), -1)  # (N, T, C)
LENGTHS = torch.tensor([16, 16, 12, 9, 16, 5])


def _b(frames, blank=0):
    """The map B: merge repeats, then drop blanks."""
    return [k for k, _ in itertools.groupby(frames) if k != blank]


def right(n):
    return _b(PROBS[n, :LENGTHS[n]].argmax(-1).tolist())


def test_a_correct_decoder_passes():
    found = check_decoder(lambda p, lengths: [right(n) for n in range(len(p))], PROBS, LENGTHS,
                          layout="NTC")
    assert found.ok and all(s["same"] for s in found.samples)
    assert [s["expected"] for s in found.samples] == [right(n) for n in range(N)]


@pytest.mark.parametrize("decode, words", [
    (lambda p, L: [[] for _ in range(len(p))], "empty output"),
    (lambda p, L: [[k for k, _ in itertools.groupby(p[n, :L[n]].argmax(-1).tolist())]
                   for n in range(len(p))], "the blank (class 0) left in the output"),
    (lambda p, L: [[k for k in p[n, :L[n]].argmax(-1).tolist() if k != 0]
                   for n in range(len(p))], "repeats not merged"),
    (lambda p, L: [[k for k, _ in itertools.groupby(
        [k for k in p[n, :L[n]].argmax(-1).tolist() if k != 0])] for n in range(len(p))],
     "repeats merged across a blank"),
    (lambda p, L: [_b(p[n, :L[n]].argmax(-1).tolist(), blank=C - 1) for n in range(len(p))],
     f"class {C - 1} treated as the blank"),
    (lambda p, L: [[k - 1 for k in right(n)] for n in range(len(p))], "labels shifted by -1"),
])
def test_each_kind_of_bug_is_named(decode, words):
    found = check_decoder(decode, PROBS, LENGTHS, layout="NTC")
    assert not found.ok
    assert any(words in f for f in found.findings), found.findings


def test_tensors_where_integers_were_expected():
    def decode(p, lengths):  # the labels come back as 0-d tensors
        return [[torch.tensor(k) for k in right(n)] for n in range(len(p))]
    found = check_decoder(decode, PROBS, LENGTHS, layout="NTC")
    assert not found.ok and "tensors returned where integers were expected" in found.findings[0]
    assert all(s["same"] for s in found.samples)  # the labels themselves are right


def test_reading_padding_is_caught():
    padded = PROBS.clone()
    onehot = torch.nn.functional.one_hot(torch.tensor([0, 2]), C).double()  # blank, then 2
    for n in range(N):
        padded[n, LENGTHS[n]:] = onehot.repeat(T, 1)[:T - LENGTHS[n]]  # adds a 2 if read
    found = check_decoder(lambda p, L: [_b(p[n].argmax(-1).tolist()) for n in range(len(p))],
                          padded, LENGTHS, layout="NTC")
    assert [s["same"] for s in found.samples] == [bool(L == T) for L in LENGTHS]


def test_strings_with_an_alphabet_and_keras_padded_output():
    alphabet = "-abcd"
    strings = check_decoder(lambda p, L: ["".join(alphabet[k] for k in right(n))
                                          for n in range(len(p))],
                            PROBS, LENGTHS, layout="NTC", alphabet=alphabet)
    assert strings.ok
    width = max(len(right(n)) for n in range(N))
    decoded = np.full((1, N, width), -1)
    for n in range(N):
        decoded[0, n, :len(right(n))] = right(n)
    keras_like = check_decoder(lambda p, L: (decoded, np.zeros((N, 1))), PROBS, LENGTHS,
                               layout="NTC")
    assert keras_like.ok, keras_like.findings


def test_a_beam_decoder_is_held_to_the_most_probable_labelling():
    # blank 0.6 in both frames: the best path is empty, but A has 0.64 of the mass
    probs = np.array([[[0.6, 0.4]], [[0.6, 0.4]]])  # (T=2, N=1, C=2)
    greedy_answer = check_decoder(lambda p: [[]], probs, beam=4)  # 4 >= the 3 prefixes
    assert not greedy_answer.ok
    assert "the best path's labelling, not the most probable one" in greedy_answer.findings[0]
    assert check_decoder(lambda p: [[1]], probs, beam=4).ok
    # a beam of 1 may keep the empty prefix at frame 1 (0.6 > 0.4) and lose A: not a fault
    assert check_decoder(lambda p: [[]], probs, beam=1).ok


def test_bad_values_and_lengths_are_one_line():
    values = np.log(np.full((3, 1, 2), 0.5))
    values[0, 0, 0], values[1, 0, 1] = np.nan, -np.inf
    with pytest.raises(ValueError, match="values: expected finite numbers"):
        check_decoder(lambda p: [[]], values)
    with pytest.raises(ValueError, match="lengths: expected whole frame counts"):
        check_decoder(lambda p, L: [[]], np.log(np.full((3, 1, 2), 0.5)), [2.7])


def test_bad_arguments_are_one_line():
    with pytest.raises(ValueError, match="layout: expected one of TNC, NTC"):
        check_decoder(lambda p: [], PROBS, layout="BTC")
    with pytest.raises(ValueError, match=r"decoder output: expected one label sequence per "
                                         r"sample \(6\)"):
        check_decoder(lambda p, L: [[1]], PROBS, LENGTHS, layout="NTC")
    with pytest.raises(ValueError, match="decoder: expected a function that decodes the batch"):
        check_decoder(lambda p, L: 1 / 0, PROBS, LENGTHS, layout="NTC")


def test_the_command(tmp_path, monkeypatch):
    (tmp_path / "mydecoder.py").write_text(textwrap.dedent("""
        import itertools
        import numpy as np
        def decode(probs, lengths):  # forgets that a blank separates repeats
            best = np.asarray(probs).argmax(-1)
            return [[k for k, _ in itertools.groupby(k for k in best[n, :lengths[n]] if k)]
                    for n in range(len(best))]
    """))
    np.savez(tmp_path / "batch.npz", probs=PROBS.numpy(), input_lengths=LENGTHS.numpy())
    monkeypatch.chdir(tmp_path)
    out = CliRunner().invoke(cli, ["doctor", "batch.npz", "--decoder", "mydecoder:decode",
                                   "--layout", "NTC"])
    assert out.exit_code == 1 and "repeats merged across a blank" in out.output, out.output
    missing = CliRunner().invoke(cli, ["doctor", "batch.npz", "--decoder", "mydecoder:nope"])
    assert missing.exit_code != 0
    assert "--decoder: expected a function 'nope' in mydecoder" in missing.output
    alone = CliRunner().invoke(cli, ["doctor", "batch.npz", "--beam", "3"])
    assert "--beam: expected --decoder with it" in alone.output


def test_the_summary_never_claims_agreement_on_samples_not_judged():
    """A narrow beam on flat samples has no required answer: none is judged, and it says so."""
    probs = np.full((6, 40, 4), 0.25)  # (T, N, C): every labelling of a length equally likely
    found = check_decoder(lambda p, L: [[1]] * 40, probs, beam=2)
    assert found.ok and found.judged == 0
    assert found.summary().startswith("no sample judged of 40: no answer is required of a "
                                      "beam of 2")
    assert "agrees" not in found.format_table()


def test_padding_read_as_frames_is_one_finding():
    """A decoder that ignores lengths: one line naming it, not one line per sample."""
    padded = PROBS.clone()
    onehot = torch.nn.functional.one_hot(torch.tensor([0, 2]), C).double()  # blank, then 2
    for n in range(N):
        padded[n, LENGTHS[n]:] = onehot.repeat(T, 1)[:T - LENGTHS[n]]  # adds a 2 if read
    found = check_decoder(lambda p, L: [_b(p[n].argmax(-1).tolist()) for n in range(len(p))],
                          padded, LENGTHS, layout="NTC")
    short = int((LENGTHS < T).sum())
    assert len(found.findings) == 1, found.findings
    assert found.findings[0].startswith(f"padding read as frames (lengths ignored) in {short} "
                                        f"of {N} samples")


def test_scores_are_held_to_what_is_declared():
    """Best-path scores from a greedy decoder: wrong as labelling, right as path."""
    def best_path_scores(p, lengths):  # (sequences, scores): the best path and its log-prob
        lp = np.log(np.asarray(p))
        return ([_b(lp[n].argmax(-1).tolist()) for n in range(len(lp))],
                [float(lp[n].max(-1).sum()) for n in range(len(lp))])
    probs = PROBS[:, :4].numpy()  # (N, 4, C): C**T = 625, brute force
    four = np.full(N, 4)
    as_labelling = check_decoder(best_path_scores, probs, four, layout="NTC",
                                 score="labelling")
    assert any(f.startswith("path scores declared as labelling") for f in as_labelling.findings)
    as_path = check_decoder(best_path_scores, probs, four, layout="NTC", score="path")
    assert as_path.ok, as_path.findings
