"""`ctcbench atlas` through the real CLI: the table, JSON, the page, and a refusal."""
from __future__ import annotations

import json

from click.testing import CliRunner

from ctcbench.caselib.known import load_atlas
from ctcbench.cli import cli


def test_atlas_json_lists_every_entry_with_its_status(tmp_path):
    """--format json: one row per entry; nothing asked for is run, GPU entries say so."""
    res = CliRunner().invoke(cli, ["atlas", "--backend", "numpy", "--format", "json",
                                   "--out", str(tmp_path / "run")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.stdout)
    entries = load_atlas()
    assert out["summary"]["entries"] == len(entries) == len(out["rows"])
    status = {r["id"]: r["status"] for r in out["rows"]}
    for e in entries:
        want = ("cannot try" if e.tryable or e.not_tried else "gpu only" if e.device == "gpu"
                else "no case")
        assert status[e.id] == want, e.id
    assert (tmp_path / "run" / "report.html").is_file()
    assert "optax-negative-float32-loss" in (tmp_path / "run" / "report.html").read_text()


def test_atlas_table_ends_with_the_counts(tmp_path):
    res = CliRunner().invoke(cli, ["atlas", "--backend", "numpy", "--out", str(tmp_path / "r")])
    assert res.exit_code == 0, res.output
    last = res.stdout.strip().splitlines()[-1]
    assert last.startswith(f"atlas: {len(load_atlas())} entries: ") and "gpu only" in last


def test_atlas_refuses_a_folder_holding_a_run(tmp_path):
    """A folder that already holds a run is refused in one line unless --resume."""
    runner = CliRunner()
    assert runner.invoke(cli, ["atlas", "--backend", "numpy", "--out", str(tmp_path)]).exit_code == 0
    res = runner.invoke(cli, ["atlas", "--backend", "numpy", "--out", str(tmp_path)])
    assert res.exit_code == 1 and res.stderr.startswith("Error: ") and "Traceback" not in res.output
    res = runner.invoke(cli, ["atlas", "--backend", "numpy", "--out", str(tmp_path), "--resume"])
    assert res.exit_code == 0, res.output
