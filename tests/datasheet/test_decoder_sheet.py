"""datasheet --decoder: every probe's reaction, a crash contained in the worker, garbage seen.

The answers a probe needs are written out here (the empty labelling of no frames, none for
an empty batch), not read from the decoder under test."""
import json

from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.datasheet.decoders import probe_decoder
from ctcbench.runtime.decoders import register_decoder, unregister_decoder


def _by_probe(name):
    return {r["probe"]: r for r in probe_decoder(name)}


def test_our_decoders_refuse_what_has_no_answer_and_answer_the_rest():
    for name in ("greedy", "beam"):
        rows = _by_probe(name)
        for probe in ("NaN in a valid frame", "length > T", "negative length", "blank = C"):
            assert rows[probe]["status"] == "raises", (name, probe, rows[probe])
        for probe in ("no frames", "empty batch", "probability 0", "blank alone", "blank last"):
            assert rows[probe]["status"] == "returns" and rows[probe]["sane"], (name, probe)
    assert _by_probe("greedy")["no frames"]["detail"].endswith(", []]")  # sample 1: nothing
    viterbi = _by_probe("viterbi")
    assert all(viterbi[p]["status"] == "raises" for p in (
        "NaN in a frame", "label = blank", "label >= C", "negative label", "target too long"))
    assert viterbi["empty target"]["sane"] and viterbi["one path"]["sane"]


def test_a_crash_is_contained_and_garbage_is_seen():
    register_decoder("aborting", "tests.decoding.faulty_decoders:AbortingOnNaNGreedy")
    register_decoder("padding-reader", "tests.decoding.faulty_decoders:PaddingReadingGreedy")
    try:
        rows = _by_probe("aborting")
        assert rows["NaN in a valid frame"]["status"] == "crashes"
        assert rows["no frames"]["status"] == "returns" and rows["no frames"]["sane"]  # restarted
        reader = _by_probe("padding-reader")
        assert reader["no frames"]["status"] == "returns" and not reader["no frames"]["sane"]
    finally:
        unregister_decoder("aborting")
        unregister_decoder("padding-reader")


def test_the_command():
    out = CliRunner().invoke(cli, ["datasheet", "--decoder", "greedy", "--format", "json"])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.output[out.output.index("{"):])["rows"]
    assert {r["probe"] for r in rows} >= {"NaN in a valid frame", "empty batch"}
    both = CliRunner().invoke(cli, ["datasheet", "--decoder", "greedy", "--backend", "numpy"])
    assert both.exit_code == 2 and "--decoder: expected it without --backend" in both.output


def test_a_users_decoder_function_is_probed_as_compare_takes_it():
    """datasheet --decoder PKG.MOD:NAME probes the user's function in its worker: the right
    greedy of the test's functions gives the empty labelling for a sample of no frames."""
    target = "tests.decoding.user_functions:greedy"
    out = CliRunner().invoke(cli, ["datasheet", "--decoder", target, "--format", "json"])
    assert out.exit_code == 0, out.output
    rows = {r["probe"]: r for r in json.loads(out.stdout)["rows"]}
    assert {r["decoder"] for r in rows.values()} == {target}
    assert rows["no frames"]["status"] == "returns" and rows["no frames"]["sane"]
