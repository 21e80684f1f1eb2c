"""The `ctcbench` command line, driven through click's runner."""
import json

from click.testing import CliRunner

from ctcbench.cli import cli


def test_backends_table():
    """`ctcbench backends` prints one line per backend with its availability."""
    result = CliRunner().invoke(cli, ["backends"])
    assert result.exit_code == 0
    lines = {line.split()[0]: line for line in result.output.splitlines()}
    assert "available" in lines["numpy"] and "unavailable" not in lines["numpy"]


def test_backends_json():
    """`--format json` gives machine-readable availability, reason and hint."""
    result = CliRunner().invoke(cli, ["backends", "--format", "json"])
    assert result.exit_code == 0
    rows = {r["name"]: r for r in json.loads(result.output)}
    assert rows["torch"]["available"] is True
    assert set(rows["torch-cuda"]) == {"name", "available", "reason", "hint", "source"}


def test_unknown_option_is_a_usage_error():
    """A wrong --format value is rejected by click with exit code 2."""
    result = CliRunner().invoke(cli, ["backends", "--format", "xml"])
    assert result.exit_code == 2 and "xml" in result.output
