"""bench --decoder: a row per decoder, size and beam, timed against greedy in turns."""
import json

from click.testing import CliRunner

from ctcbench.bench.run import bench
from ctcbench.cli import cli


def test_rows_per_beam_with_paired_ratios(tmp_path):
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([{"T": 30, "N": 2, "C": 6, "L": 5}]))
    result = bench(decoders=["beam"], beams=(1, 3), grid=str(grid), repeat=2, warmup=0,
                   out=tmp_path / "b", progress=False)
    rows = {(r["backend"], r["beam"]): r for r in result.rows.to_dict("records")}
    assert set(rows) == {("greedy", 1), ("beam", 1), ("beam", 3)}
    greedy = rows["greedy", 1]
    assert greedy["ratio_to_greedy"] == 1.0 and greedy["repeat"] == 2
    beam = rows["beam", 3]
    assert beam["ns_per_frame"] == beam["time_median_s"] / (30 * 2) * 1e9


def test_the_command_and_its_bad_input(tmp_path):
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([{"T": 20, "N": 1, "C": 4, "L": 3}]))
    out = CliRunner().invoke(cli, ["bench", "--decoder", "beam", "--beam", "2", "--grid",
                                   str(grid), "--repeat", "1", "--out", str(tmp_path / "b")])
    assert out.exit_code == 0, out.output
    assert "x greedy" in out.output and (tmp_path / "b" / "report.html").is_file()
    assert "Decoders" in (tmp_path / "b" / "report.html").read_text()
    bad = CliRunner().invoke(cli, ["bench", "--decoder", "beam", "--beam", "0"])
    assert bad.exit_code == 2 and "--beam" in bad.output and "positive integers" in bad.output
    both = CliRunner().invoke(cli, ["bench", "--decoder", "beam", "--backend", "numpy"])
    assert "--decoder: expected it without --backend" in both.output


def test_a_users_decoder_function_is_timed_as_compare_takes_it(tmp_path):
    """bench --decoder PKG.MOD:NAME: the function is registered (as compare --decoder does)
    and timed beside greedy, in its rows under its own name."""
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([{"T": 20, "N": 1, "C": 4, "L": 3}]))
    target = "tests.decoding.user_functions:prefix_beam"
    out = CliRunner().invoke(cli, ["bench", "--decoder", target, "--beam", "2", "--grid",
                                   str(grid), "--repeat", "1", "--format", "json",
                                   "--out", str(tmp_path / "b")])
    assert out.exit_code == 0, out.output
    rows = json.loads(out.stdout)
    assert {(r["backend"], r["beam"]) for r in rows} == {("greedy", 1), (target, 2)}
    assert all(r["time_median_s"] > 0 for r in rows)
