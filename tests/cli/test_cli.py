"""The `ctcbench` command line, driven through click's runner."""
import json

import pytest

from click.testing import CliRunner

from ctcbench.caselib.library import load_cases
from ctcbench.cli import cli

from conftest import MINIMAL_CASE


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
    assert set(rows["torch-cuda"]) == {"name", "available", "reason", "hint", "source",
                                       "nondeterministic"}
    assert rows["numpy"]["nondeterministic"] is None


def test_backends_table_shows_a_declared_nondeterminism(register_backends):
    """A backend declaring ``nondeterministic = 1e-9`` says so on its line."""
    register_backends("jitter-declared", "wrong_backends:DeclaredNondeterministic")
    result = CliRunner().invoke(cli, ["backends"])
    lines = {line.split()[0]: line for line in result.output.splitlines()}
    assert lines["jitter-declared"].endswith("plugin   nondeterministic (two calls within 1e-09)")
    assert "nondeterministic" not in lines["numpy"]


def test_unknown_option_is_a_usage_error():
    """A wrong --format value is rejected by click with exit code 2."""
    result = CliRunner().invoke(cli, ["backends", "--format", "xml"])
    assert result.exit_code == 2 and "xml" in result.output


def test_cases_command_lists_library_and_user_folders(tmp_path):
    """`ctcbench cases` lists every case (table and JSON); a bad folder is a clean CLI error."""
    from ctcbench.caselib.decoder_cases import load_decoder_cases
    runner = CliRunner()
    res = runner.invoke(cli, ["cases", "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    decoders = [r for r in rows if r.get("library") == "decoders"]
    assert len(rows) - len(decoders) == len(load_cases()) and rows[0]["provenance"]
    assert len(decoders) == len(load_decoder_cases())
    table = runner.invoke(cli, ["cases"])
    assert "published/tf_basic" in table.stdout
    (tmp_path / "bad.toml").write_text(MINIMAL_CASE.format(name="x", oracle="magic"))
    res = runner.invoke(cli, ["cases", "--cases", str(tmp_path)])
    assert res.exit_code == 1 and "expect.oracle: expected one of" in res.output
    assert "Traceback" not in res.output


class _Unavailable:
    def __init__(self):
        from ctcbench import BackendUnavailable
        raise BackendUnavailable("its device is not here", hint="use another machine")


def test_a_backend_that_cannot_run_is_one_line_from_any_command(register_backends, tmp_path):
    """A library error that is not a ValueError (BackendUnavailable, a RuntimeError) still
    reaches the user as one line, from whichever command raised it."""
    register_backends("nowhere", _Unavailable)
    for option, args in (("--backend", ["fuzz", "--backend", "nowhere", "--budget", "1"]),
                         ("--against", ["fuzz", "--backend", "numpy", "--against", "nowhere",
                                        "--budget", "1"])):
        res = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / option)])
        assert res.exit_code == 1 and "Traceback" not in res.output, res.output
        assert res.stderr.strip().splitlines() == [
            f"Error: {option}: 'nowhere' cannot run here: its device is not here "
            f"(use another machine)"]


def test_list_options_take_repeats_and_comma_lists_alike(tmp_path):
    """``--backend a,b`` is ``--backend a --backend b`` in every command (here compare, whose
    rows name the backends checked, and an unknown name in a list is still named)."""
    def backends_checked(*args):
        res = CliRunner().invoke(cli, ["compare", *args, "--case", "single_alignment_*",
                                       "--case", "tf_basic",
                                       "--no-plot", "--format", "json",
                                       "--out", str(tmp_path / str(len(list(tmp_path.iterdir()))))])
        assert res.exit_code == 0, res.output
        rows = json.loads(res.stdout)["rows"]
        assert {r["case"] for r in rows} == {"single_alignment_repeats",
                                             "single_alignment_distinct", "tf_basic"}
        return sorted({r["backend"] for r in rows})
    assert backends_checked("--backend", "numpy,numba") == ["numba", "numpy"]
    assert backends_checked("--backend", "numpy,", "--backend", " numba") == ["numba", "numpy"]
    res = CliRunner().invoke(cli, ["compare", "--backend", "numpy,nosuch", "--no-plot",
                                   "--out", str(tmp_path / "bad")])
    assert res.exit_code == 1 and "--backend: expected one of " in res.output
    assert "got 'nosuch'" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(cli, ["bench", "--backend", " ,", "--out", str(tmp_path / "empty")])
    assert res.exit_code == 2 and "--backend" in res.output and "expected NAME" in res.output


@pytest.mark.parametrize("command", ["compare", "bench", "datasheet", "fuzz"])
def test_an_unknown_backend_reads_the_same_in_every_command(tmp_path, command):
    """One line, before any progress, naming the option and offering the close name; the
    known names listed are exactly those ``ctcbench backends`` lists."""
    listed = CliRunner().invoke(cli, ["backends", "--format", "json"])
    known = sorted(b["name"] for b in json.loads(listed.stdout))
    res = CliRunner().invoke(cli, [command, "--backend", "nmba", "--out", str(tmp_path / "r")])
    assert res.exit_code == 1, res.output
    assert res.output == (f"Error: --backend: expected one of {', '.join(known)}, "
                          f"got 'nmba' (did you mean 'numba'?)\n")
    assert not (tmp_path / "r").exists()


def test_a_reader_that_stops_early_ends_the_listing_quietly():
    """`ctcbench cases | head -1`: the pipe closes after one line; no 'Broken pipe' error,
    no traceback on stderr."""
    import subprocess
    import sys
    proc = subprocess.Popen([sys.executable, "-m", "ctcbench", "cases"], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()  # as head does after its line
    err = proc.stderr.read().decode()
    proc.wait(timeout=60)
    assert first.startswith(b"alignment/") and err == "", err
