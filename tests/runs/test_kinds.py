"""Run kinds: a folder of a kind this version does not know, of a newer row format, or made by
hand is refused by every command, ``report`` included, in one line naming the folder."""
from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.drivers import DRIVERS, kinds

def one_line_error(*args) -> str:
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code == 1, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), res.stderr
    assert "Traceback" not in res.output
    return lines[0]


def folder(tmp: Path, name: str, meta: dict | None, rows: str) -> Path:
    path = tmp / name
    path.mkdir()
    if meta is not None:
        (path / "meta.json").write_text(json.dumps(meta))
    (path / "rows.jsonl").write_text(rows)
    return path


@pytest.fixture
def odd_folders(tmp_path) -> dict[str, Path]:
    return {
        "foreign": folder(tmp_path, "foreign", {"kind": "profile", "row_format": 1}, "{}\n"),
        "future": folder(tmp_path, "future", {"kind": "bench", "row_format": 999},
                         '{"backend": "numpy"}\n'),
        "hand-made": folder(tmp_path, "hand", None, '{"x": 1, "y": 2}\n'),
    }


def test_every_driver_declares_a_kind_with_a_command_and_a_page():
    """A kind with a page context has its template beside it; one without gets the table of
    its rows (ctcbench/drivers.py: ROWS_TEMPLATE)."""
    from importlib.resources import files
    assert set(kinds()) == set(DRIVERS)
    for kind in kinds().values():
        assert (files("ctcbench") / kind.template).is_file() == bool(kind.context), kind.name
        assert kind.key and kind.row_format >= 1
        assert kind.name in cli.commands, kind.name


@pytest.mark.parametrize("which", ["foreign", "future", "hand-made"])
def test_report_refuses_in_one_line(odd_folders, which):
    path = odd_folders[which]
    line = one_line_error("report", str(path))
    assert str(path) in line
    expected = {"foreign": "expected a run of a kind this ctcbench knows",
                "future": "expected bench rows of format 1, the one this ctcbench reads, got",
                "hand-made": "expected a ctcbench run folder"}[which]
    assert expected in line
    assert {"foreign": "which holds a run of kind 'profile'",
            "future": "which holds format 999 (the folder was written by a newer ctcbench)",
            "hand-made": "which holds neither"}[which] in line


@pytest.mark.parametrize("command", DRIVERS)
@pytest.mark.parametrize("which", ["foreign", "future", "hand-made"])
@pytest.mark.parametrize("resume", [False, True])
def test_every_driver_refuses_in_one_line_and_writes_nothing(odd_folders, command, which,
                                                             resume):
    path = odd_folders[which]
    before = {p.name: p.read_bytes() for p in path.iterdir()}
    # the folder is checked before any slow work starts, so the defaults do (one backend
    # where the command takes one)
    takes_backend = any("--backend" in p.opts for p in cli.commands[command].params)
    line = one_line_error(command, *(["--backend", "numpy"] * takes_backend), "--out", str(path),
                          *(["--resume"] if resume else []))
    assert str(path) in line
    assert {p.name: p.read_bytes() for p in path.iterdir() if p.name != "run.lock"} == before
