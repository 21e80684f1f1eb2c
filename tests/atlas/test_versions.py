"""The atlas's version matrix: releases named wrong are one line; a real older optax is
installed once beside the stack and its entries tried with it (the rows name the release that
ran), a release that does not exist is said so with pip's reason."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ctcbench.atlas.versions import version_matrix
from ctcbench.cli import cli


@pytest.mark.parametrize("spec, message", [
    ("optax", "--versions: expected DIST=V1,V2,... (one of optax, keras, then releases)"),
    ("jax=0.4.30", "--versions: expected one of keras, optax, got 'jax'"),
    ("optax=0.2.5,0.2.5", "--versions: expected each release once"),
])
def test_a_bad_versions_spec_is_one_line_before_any_work(tmp_path, spec, message):
    res = CliRunner().invoke(cli, ["atlas", "--versions", spec, "--out", str(tmp_path / "r")])
    assert res.exit_code != 0 and message in res.output and "Traceback" not in res.output
    assert not (tmp_path / "r").exists()


@pytest.mark.long
def test_an_older_optax_runs_the_optax_entries_and_a_missing_one_is_said(tmp_path):
    pytest.importorskip("optax", reason="needs optax: pip install 'ctcbench[jax]'")
    said = []
    m = version_matrix("optax=0.2.5,9.9.9", tmp_path / "out", tmp_path / "cache", say=said.append)
    assert m["framework"] == "optax"
    ran, missing = m["versions"]["0.2.5"], m["versions"]["9.9.9"]
    assert ran["release"] == "ran" and "optax-negative-float32-loss" in ran
    assert missing["release"].startswith("does not install here: ")
    assert "No matching distribution" in missing["release"]
    rows = json.loads((tmp_path / "out" / "optax-0.2.5" / "rows.json").read_text())
    probed = next(r for r in rows if r["id"] == "optax-infeasible-finite-loss")
    assert probed["reason"].endswith("optax 0.2.5"), probed["reason"]  # that release ran
    assert (tmp_path / "cache" / "optax-0.2.5" / ".installed").is_file()
    again = version_matrix("optax=0.2.5", tmp_path / "again", tmp_path / "cache", say=said.append)
    assert any("(cached)" in line for line in said) and again["versions"]["0.2.5"] == ran


@pytest.mark.long
def test_the_release_matrix_is_on_the_page(tmp_path):
    """A run with --versions: versions.json in the folder and its table on report.html."""
    pytest.importorskip("optax", reason="needs optax: pip install 'ctcbench[jax]'")
    res = CliRunner().invoke(cli, ["atlas", "--backend", "optax", "--versions", "optax=0.2.5",
                                   "--versions-cache", str(tmp_path / "cache"), "--out",
                                   str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    assert "optax 0.2.5 (installed): trying its entries" in res.stderr  # progress, not output
    matrix = json.loads((tmp_path / "run" / "versions.json").read_text())["optax"]
    assert matrix["versions"]["0.2.5"]["release"] == "ran"
    assert "optax releases: 0.2.5 ran" in res.stdout
    assert "optax releases" in (tmp_path / "run" / "report.html").read_text()


def test_first_bad_and_first_fixed_by_hand():
    """Releases in the order tried; one that did not run is skipped; a fix must come after
    the last release that reproduces."""
    from ctcbench.atlas.versions import firsts
    table = {"1": {"release": "ran", "a": "fixed", "b": "reproduces"},
             "2": {"release": "does not install here: ..."},
             "3": {"release": "ran", "a": "reproduces", "b": "fixed"},
             "4": {"release": "ran", "a": "fixed", "b": "reproduces"}}
    assert firsts(table) == ({"a": "3", "b": "1"}, {"a": "4"})
