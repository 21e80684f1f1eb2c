"""`ctcbench report --help` says what the command does with several run folders."""
from __future__ import annotations

from click.testing import CliRunner

from ctcbench.cli import cli


def test_the_help_says_that_several_folders_need_out(tmp_path):
    """Two real run folders without --out are refused naming --out, with --out they make one
    page; the command's description and --out's help both say so."""
    runner = CliRunner()
    folders = [tmp_path / "a", tmp_path / "b"]
    for folder in folders:
        res = runner.invoke(cli, ["compare", "--backend", "numpy", "--case", "tf_basic",
                                  "--dtype", "float64", "--no-plot", "--out", str(folder)])
        assert res.exit_code == 0, res.output
    res = runner.invoke(cli, ["report", *map(str, folders)])
    assert res.exit_code == 1 and res.stderr.startswith("Error: --out: expected an HTML file")
    page = tmp_path / "both.html"
    res = runner.invoke(cli, ["report", *map(str, folders), "--out", str(page)])
    assert res.exit_code == 0 and page.is_file(), res.output
    text = " ".join(runner.invoke(cli, ["report", "--help"]).stdout.split())
    description, options = text.split(" Options: ")
    assert "several folders need --out" in description
    assert "--out FILE HTML file to write, required for several folders" in options
