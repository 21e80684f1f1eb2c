"""fuzz --decoder: a planted decoder fault is found, shrunk and written as a case that compare
replays; ctcbench's own beam search is clean on the same budget."""
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.compare.run import compare
from ctcbench.fuzz.run import fuzz
from ctcbench.runtime.decoders import register_decoder
from ctcbench.runtime.status import Status


def test_a_planted_fault_is_found_and_replayed(tmp_path):
    register_decoder("no-merge-greedy", "tests.decoding.faulty_decoders:NoMergeGreedy",
                     replace=True)
    found = fuzz(decoder="no-merge-greedy", budget=20, seed=1, out=tmp_path / "f",
                 progress=False)
    assert found.summary["found"], found.summary
    assert "repeats not merged" in found.summary["what"]
    replay = compare(None, case_dirs=[str(tmp_path / "f" / "cases")],
                     decoders=["no-merge-greedy"], out=tmp_path / "c", progress=False)
    assert list(replay.rows["status"]) == [Status.MISMATCH]


def test_our_beam_search_is_clean(tmp_path):
    clean = fuzz(decoder="beam", budget=6, out=tmp_path / "f", progress=False)
    assert not clean.summary["found"] and clean.summary["tried"] > 20


def test_bad_options_are_one_line(tmp_path):
    out = CliRunner().invoke(cli, ["fuzz", "--decoder", "nope", "--out", str(tmp_path / "x")])
    assert out.exit_code != 0 and "--decoder: expected one of" in out.output
    both = CliRunner().invoke(cli, ["fuzz", "--decoder", "beam", "--backend", "numpy"])
    assert "--decoder: expected it alone" in both.output
