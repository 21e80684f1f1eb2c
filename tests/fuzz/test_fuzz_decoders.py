"""fuzz --decoder: a planted decoder fault is found, shrunk and written as a case that compare
replays; ctcbench's own beam search is clean on the same budget."""
import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.compare.run import compare
from ctcbench.fuzz.run import fuzz
from ctcbench.runtime.decoders import register_decoder, unregister_decoder
from ctcbench.runtime.status import Status


def test_a_planted_fault_is_found_and_replayed(tmp_path):
    register_decoder("no-merge-greedy", "tests.decoding.faulty_decoders:NoMergeGreedy")
    try:
        found = fuzz(decoder="no-merge-greedy", budget=20, seed=1, out=tmp_path / "f",
                     progress=False)
        assert found.summary["found"], found.summary
        assert "repeats not merged" in found.summary["what"]
        replay = compare(None, case_dirs=[str(tmp_path / "f" / "cases")],
                         decoders=["no-merge-greedy"], out=tmp_path / "c", progress=False)
        assert list(replay.rows["status"]) == [Status.MISMATCH]
    finally:
        unregister_decoder("no-merge-greedy")


@pytest.mark.long
def test_our_beam_search_is_clean(tmp_path):
    clean = fuzz(decoder="beam", budget=6, out=tmp_path / "f", progress=False)
    assert not clean.summary["found"] and clean.summary["tried"] > 20


def test_bad_options_are_one_line(tmp_path):
    out = CliRunner().invoke(cli, ["fuzz", "--decoder", "nope", "--out", str(tmp_path / "x")])
    assert out.exit_code != 0 and "--decoder: expected one of" in out.output
    both = CliRunner().invoke(cli, ["fuzz", "--decoder", "beam", "--backend", "numpy"])
    assert "--decoder: expected it alone" in both.output


@pytest.mark.long
def test_an_aligner_function_is_fuzzed_in_its_worker(tmp_path):
    """fuzz --aligner PKG.MOD:NAME: a segfault at T == L is found as a crash, shrunk, and
    compare --aligner replays it as a crashed row."""
    target = "tests.decoding.user_functions:segfault_when_full"
    try:
        found = fuzz(aligner=target, budget=20, seed=1, out=tmp_path / "f", progress=False)
        assert found.summary["found"], found.summary
        assert found.summary["what"].startswith("crashed: crashed on drawn sample")
        assert "SIGSEGV" in found.summary["what"]
        replay = compare(None, case_dirs=[str(tmp_path / "f" / "cases")], aligners=[target],
                         out=tmp_path / "c", progress=False)
        assert list(replay.rows["status"]) == [Status.CRASHED]
    finally:
        unregister_decoder(target)


def test_a_decoder_function_is_fuzzed(tmp_path):
    """fuzz --decoder PKG.MOD:NAME names the prefix beam search's repeat bug."""
    target = "tests.decoding.user_functions:repeat_bug_beam"
    try:
        found = CliRunner().invoke(cli, ["fuzz", "--decoder", target, "--budget", "20",
                                         "--out", str(tmp_path / "f")])
        assert found.exit_code == 1, found.output
        assert "a repeat extended without a blank" in found.output
        assert f"reproduce: ctcbench compare --cases {tmp_path / 'f' / 'cases'} --decoder " \
               f"{target}" in found.output
    finally:
        unregister_decoder(target)
