"""A user's decoders and aligners as plain functions (``--decoder/--aligner PKG.MOD:NAME``):
each planted fault of tests/decoding/user_functions.py is found and named, a crash is a
``crashed`` row naming its case, and the right functions pass with no false alarm. The
answers come from brute force over every path and a max-plus recursion (the judge), never
from the functions under test."""
import itertools
import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from ctcbench.caselib.decoder_cases import load_decoder_cases
from ctcbench.caselib.decoder_judge import repeat_extension_logprob
from ctcbench.compare.run import compare
from ctcbench.runtime.decoder_functions import add_decoder_function
from ctcbench.runtime.decoders import get_decoder, unregister_decoder
from ctcbench.runtime.status import Status

ROOT = Path(__file__).resolve().parents[2]
MOD = "tests.decoding.user_functions"
SMALL = ["edges/*", "repeats/*", "aligners/*"]  # every family but the long one


def rows_of(tmp_path, decoders=(), aligners=(), cases=SMALL, **kwargs):
    """compare's decoder rows for functions of user_functions.py, by (function, case)."""
    result = compare(None, cases, decoders=[f"{MOD}:{d}" for d in decoders],
                     aligners=[f"{MOD}:{a}" for a in aligners], out=tmp_path / "run",
                     progress=False, plot=False, **kwargs)
    try:
        return {(r["backend"].split(":")[1], r["case"]): r
                for r in result.rows.to_dict("records")}
    finally:
        for name in [*decoders, *aligners]:
            unregister_decoder(f"{MOD}:{name}")


def test_right_functions_pass_every_case(tmp_path):
    """A greedy, a prefix beam and a Viterbi aligner written from the definitions: all ok."""
    rows = rows_of(tmp_path, ["greedy", "prefix_beam", "max_beam_declared"], ["viterbi"])
    bad = {k: r["reason"] for k, r in rows.items() if r["status"] != Status.OK}
    small = [c for c in load_decoder_cases() if c.family != "long"]
    assert not bad and len(rows) == 4 * len(small), bad


@pytest.mark.long
def test_right_functions_pass_the_long_cases(tmp_path):
    """The same on the long cases (T = 2000, C = 2000): tens of seconds of pure Python."""
    rows = rows_of(tmp_path, ["greedy", "prefix_beam"], ["viterbi"], cases=["long/*"])
    assert {r["status"] for r in rows.values()} == {Status.OK}, rows


@pytest.mark.parametrize("function, case, words", [
    ("greedy_all_frames", "ragged_lengths", "padding read as frames (lengths ignored)"),
    ("repeat_bug_beam", "repeat_without_blank", "a repeat extended without a blank (the "
                                                "prefix beam search bug"),
    ("repeat_bug_beam", "double_letter_word", "a repeat extended without a blank"),
    ("max_beam", "most_probable_is_not_best_path", "path scores declared as labelling"),
    ("max_beam", "repeat_across_blank", "path scores declared as labelling"),
])
def test_each_decoder_fault_is_named(tmp_path, function, case, words):
    row = rows_of(tmp_path, [function], cases=[case])[(function, case)]
    assert row["status"] == Status.MISMATCH and words in row["reason"], row["reason"]
    assert "repeats not merged" not in row["reason"]


def test_padding_is_named_once_per_sample_and_nothing_else(tmp_path):
    """Each short sample of the ragged case says so, the full-length one passes."""
    row = rows_of(tmp_path, ["greedy_all_frames"], cases=["ragged_lengths"])[
        ("greedy_all_frames", "ragged_lengths")]
    said = row["reason"].split("; ")
    assert [s.split(":")[0] for s in said] == ["sample 1", "sample 2"]
    assert all("padding read as frames" in s for s in said)


@pytest.mark.parametrize("function, case, status, words", [
    ("segfault_when_full", "target_fills_every_frame", Status.CRASHED,
     ["crashed on target_fills_every_frame sample 0 (T=3, target [1, 2, 1], L=3)", "SIGSEGV"]),
    ("abort_on_infeasible", "infeasible_repeat", Status.CRASHED,
     ["crashed on infeasible_repeat sample 0 (T=2, target [1, 1], L=2)", "SIGABRT"]),
    ("zeros_for_empty", "empty_target_blank_last", Status.MISMATCH,
     ["class 0 in every frame for an empty target, not the blank (2)"]),
    ("hangs_when_full", "target_fills_every_frame", Status.TIMEOUT,
     ["sample 0 (T=3, L=3)", "did not answer within 2 s"]),
])
def test_each_aligner_fault_is_found_and_the_next_case_runs(tmp_path, function, case, status,
                                                            words):
    """The fault's case is its row; the worker it cost is replaced for the next case."""
    rows = rows_of(tmp_path, aligners=[function], cases=[case, "target_of_four_fifths"])
    row = rows[(function, case)]
    assert row["status"] == status and all(w in row["reason"] for w in words), row["reason"]
    assert rows[(function, "target_of_four_fifths")]["status"] == Status.OK


def test_a_target_with_no_path_must_be_refused_not_aligned(tmp_path):
    """An aligner returning a path for an infeasible target is wrong; raising is right."""
    rows = rows_of(tmp_path, aligners=["viterbi"], cases=["infeasible_*"])
    assert {r["status"] for r in rows.values()} == {Status.OK}
    from ctcbench.caselib.decoder_judge import judge_alignment
    from types import SimpleNamespace
    lp = np.log(np.full((2, 3), 1 / 3))
    said = judge_alignment(SimpleNamespace(score="path", dtype="float64"), lp, [1, 1],
                           ([1, 1], math.log(1 / 9)), blank=0)
    assert "expected a refusal" in said[0].message and "needs 3" in said[0].message


def test_a_function_without_a_blank_parameter_is_tried_on_blank_0_only(tmp_path, monkeypatch):
    (tmp_path / "noblank.py").write_text(
        "import numpy as np\n"
        "def decode(log_probs, lengths):\n"
        "    best = log_probs.argmax(-1)\n"
        "    out = []\n"
        "    for n, t in enumerate(lengths):\n"
        "        path = best[:t, n].tolist()\n"
        "        labels = [k for i, k in enumerate(path) if k and (i == 0 or path[i-1] != k)]\n"
        "        out.append([[labels, None]])\n"
        "    return out\n"
        "decode.search = 'greedy'\n"
        "decode.score = 'none'\n")
    monkeypatch.chdir(tmp_path)
    result = compare(None, ["blank_last", "blank_first_and_last"], decoders=["noblank:decode"],
                     out=tmp_path / "run", progress=False, plot=False)
    unregister_decoder("noblank:decode")
    status = dict(zip(result.rows["case"], result.rows["status"]))
    assert status == {"blank_last": Status.UNSUPPORTED, "blank_first_and_last": Status.OK}


def test_what_a_function_declares_is_checked_at_once(tmp_path, monkeypatch):
    (tmp_path / "declares.py").write_text(
        "def bad(log_probs, lengths, *, blank, beam):\n    return []\n"
        "bad.score = 'logprob'\n"
        "def good(log_probs, lengths, *, blank, beam):\n    return []\n"
        "good.score = 'path'\n")
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ValueError, match=r"declares:bad\.score: expected one of labelling, "
                                         r"none, path, got 'logprob'"):
        add_decoder_function("declares:bad")
    with pytest.raises(ValueError, match=r"--score: expected the score declares:good declares "
                                         r"\('path'\), or no --score, got 'labelling'"):
        add_decoder_function("declares:good", score="labelling")
    with pytest.raises(ValueError, match=r"--aligner: expected a function 'nope' in declares"):
        add_decoder_function("declares:nope", role="aligner")
    with pytest.raises(ValueError, match=r"--decoder: expected PKG\.MOD:NAME"):
        add_decoder_function("declares.bad")
    name, found = add_decoder_function("declares:good")
    assert found == "declares:good: decoder, search beam (default), score path (declared); " \
                    "any blank"
    assert get_decoder(name).traits.score == "path"
    unregister_decoder(name)


def _brute_repeat_extension(lp, labels, blank):
    """log of the sum, over every path, of its probability times the number of ways the
    repeat-extension bug reads it as ``labels``: each run of r equal frames of a label (no
    blank inside) may end as any m in 1..r copies of it, in C(r - 1, m - 1) ways."""
    T, C = lp.shape
    total = 0.0
    for path in itertools.product(range(C), repeat=T):
        runs = [(k, len(list(g))) for k, g in itertools.groupby(path) if k != blank]
        ways = 0
        for counts in itertools.product(*[range(1, r + 1) for _, r in runs]):
            read = [k for (k, _), m in zip(runs, counts) for _ in range(m)]
            if read == list(labels):
                ways += math.prod(math.comb(r - 1, m - 1) for (_, r), m in zip(runs, counts))
        total += ways * math.exp(sum(lp[t, k] for t, k in enumerate(path)))
    return math.log(total) if total > 0 else -math.inf


@pytest.mark.parametrize("seed", range(6))
def test_the_repeat_extension_model_against_brute_force(seed):
    rng = np.random.default_rng(seed)
    T, C = int(rng.integers(2, 6)), int(rng.integers(2, 4))
    x = rng.normal(size=(T, C)) * 2
    lp = x - np.log(np.exp(x).sum(1, keepdims=True))
    blank = int(rng.integers(0, C))
    label = next(k for k in range(C) if k != blank)
    for labels in ([label, label], [label], [label, label, label][:T]):
        assert repeat_extension_logprob(lp, labels, blank=blank) == pytest.approx(
            _brute_repeat_extension(lp, labels, blank), rel=1e-12, abs=1e-12)


def _cli(*args, cwd=ROOT):
    return subprocess.run([sys.executable, "-m", "ctcbench", "compare", *args,
                           "--format", "json", "--no-plot"], cwd=cwd, capture_output=True,
                          text=True, timeout=600)


def test_compare_decoder_function_end_to_end(tmp_path):
    """The command in a subprocess: the repeat bug named, the right beam ok, exit 1."""
    done = _cli("--decoder", f"{MOD}:repeat_bug_beam", "--decoder", f"{MOD}:prefix_beam",
                "--decoder", "beam", "--case", "repeats/*", "--out", str(tmp_path / "run"))
    assert done.returncode == 1, done.stderr[-2000:]
    rows = json.loads(done.stdout)["rows"]
    status = {(r["backend"], r["case"]): r for r in rows}
    assert {r["status"] for (b, _), r in status.items() if b != f"{MOD}:repeat_bug_beam"} == \
        {Status.OK}
    named = [r for (b, _), r in status.items() if b == f"{MOD}:repeat_bug_beam"]
    assert len(named) == 4 and all(r["status"] == Status.MISMATCH for r in named)
    assert all("a repeat extended without a blank" in r["reason"] for r in named)
    assert f"{MOD}:repeat_bug_beam: decoder, search beam (default), score labelling " \
           "(declared)" in done.stderr


def test_compare_aligner_function_end_to_end(tmp_path):
    """A segfault in the worker is a crashed row naming its case; exit 1; the rest run."""
    done = _cli("--aligner", f"{MOD}:segfault_when_full", "--aligner", f"{MOD}:viterbi",
                "--case", "aligners/*", "--out", str(tmp_path / "run"))
    assert done.returncode == 1, done.stderr[-2000:]
    rows = {(r["backend"].split(":")[1], r["case"]): r for r in json.loads(done.stdout)["rows"]}
    crashed = {c for (f, c), r in rows.items() if r["status"] == Status.CRASHED}
    assert crashed == {"target_fills_every_frame", "infeasible_repeat"}
    assert "crashed on target_fills_every_frame sample 0" in \
        rows[("segfault_when_full", "target_fills_every_frame")]["reason"]
    assert all(r["status"] == Status.OK for (f, _), r in rows.items() if f == "viterbi")


def test_score_without_a_function_is_one_line(tmp_path):
    done = _cli("--decoder", "greedy", "--score", "path", "--out", str(tmp_path / "run"))
    assert done.returncode != 0
    assert "Error: --score: expected a --decoder or --aligner PKG.MOD:NAME with it, got " \
           "--score path" in done.stderr


def test_ctc_segmentation_wrapped_as_a_user_would(tmp_path):
    """ctc-segmentation 1.7.5 behind the contract: it refuses feasible targets of fewer than
    len(target) + 3 frames, enters repeats on consecutive frames, and its path is not the
    best one; it neither crashes nor returns a path for a target with no path."""
    pytest.importorskip("ctc_segmentation")
    rows = rows_of(tmp_path, aligners=["ctc_segmentation_align"])
    status = {c: r["status"] for (_, c), r in rows.items()}
    assert Status.CRASHED not in status.values()
    assert status["infeasible_repeat"] == status["infeasible_too_long"] == Status.OK
    refused = rows[("ctc_segmentation_align", "target_fills_every_frame")]
    assert refused["status"] == Status.ERROR
    assert "AssertionError: Audio is shorter than text!" in refused["reason"]
    assert "repeated labels entered on consecutive frames" in rows[
        ("ctc_segmentation_align", "repeat_across_blank")]["reason"]
