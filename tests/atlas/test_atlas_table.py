"""The atlas for people: the terminal table and the page say why each entry that was not tried
here was not, the same reason the run folder's rows.json holds."""
from __future__ import annotations

import json
import re
import tomllib
from html.parser import HTMLParser
from pathlib import Path

from click.testing import CliRunner

import ctcbench
from ctcbench.cli import cli

FILE = Path(__file__).resolve().parents[2] / "cases" / "atlas.toml"
NOT_TRIED = ("cannot try", "gpu only", "no case")  # the outcomes of an entry not tried here


class TableCells(HTMLParser):
    """The text of each cell of each body row of the page's entries table (``table.sortable``)."""

    def __init__(self):
        super().__init__()
        self.rows, self.depth, self.cell = [], 0, None

    def handle_starttag(self, tag, attrs):
        if tag == "table":
            self.depth += 1 if self.depth or "sortable" in (dict(attrs).get("class") or "") else 0
        elif self.depth and tag == "tr":
            self.rows.append([])
        elif self.depth and tag == "td":
            self.cell = ""

    def handle_endtag(self, tag):
        if tag == "table" and self.depth:
            self.depth -= 1
        elif tag == "td" and self.cell is not None:
            self.rows[-1].append(" ".join(self.cell.split()))
            self.cell = None

    def handle_data(self, data):
        if self.cell is not None:
            self.cell += data + " "


def test_the_table_and_the_page_say_why_an_entry_was_not_tried(tmp_path):
    """Run on the backends of the atlas's cases that cannot run here (the others are not asked
    for): each entry not tried ends its table line with its rows.json reason, shows it on the
    page beside its status, and that reason is the atlas file's ``not_tried`` where it has
    one and names the registry's reason where the backend is unavailable."""
    raw = {e["id"]: e for e in tomllib.loads(FILE.read_text())["entry"]}
    unavailable = {i.name: i.reason for i in ctcbench.list_backends() if not i.available}
    names = sorted({e["backend"] for e in raw.values() if "case" in e} & set(unavailable))
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, ["atlas", "--out", str(out),
                                   *(a for n in names or ["numpy"] for a in ("--backend", n))])
    assert res.exit_code == 0, res.output
    rows = json.loads((out / "rows.json").read_text())
    lines = res.stdout.splitlines()
    assert lines[0].split()[-3:] == ["why", "not", "tried"]
    assert len(rows) == len(raw) and lines[-1].startswith(f"atlas: {len(raw)} entries: ")
    parser = TableCells()
    parser.feed((out / "report.html").read_text(encoding="utf-8"))
    page = {cells[0]: cells for cells in parser.rows if cells}
    assert set(page) == set(raw)
    for r, line in zip(rows, lines[1:]):
        words = [*r["status"].split(), r["id"]]
        assert line.split()[:len(words)] == words, line
        status_cell = page[r["id"]][1]
        if r["status"] in NOT_TRIED:
            assert r["reason"] and line.endswith("  " + r["reason"]), line
            assert status_cell == f"{r['status']} {' '.join(r['reason'].split())}", status_cell
        else:
            assert r["reason"] not in line and status_cell.startswith(r["status"]), line
        entry = raw[r["id"]]
        if "not_tried" in entry and "case" not in entry and "probe" not in entry:
            assert r["reason"] == entry["not_tried"]
        if entry.get("backend") in names and ("case" in entry or "probe" in entry):
            assert r["status"] == "cannot try" and unavailable[entry["backend"]] in r["reason"]
    if names:  # a backend that cannot run here gives its entries a reason of its own
        assert any(unavailable[n] in line for n in names for line in lines)


DOCS = FILE.parents[1] / "docs" / "atlas.md"
EXAMPLE = re.compile(r"^```console\n\$ CTCBENCH_THREADS=1 ctcbench atlas\n(.*?)^```", re.S | re.M)


def test_the_docs_example_is_what_the_command_prints(tmp_path, monkeypatch):
    """docs/atlas.md's block against a run of the torch entries (seconds): the same header;
    entries that exist, in the atlas's order, each cut marked ``...``; each row that run
    speaks for (torch's, the GPU-only ones, those no backend tries, the uninstalled ones)
    word for word, the why-not column included; the closing line's form and entry count."""
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    shown = EXAMPLE.search(DOCS.read_text()).group(1).splitlines()
    out = tmp_path / "run"
    res = CliRunner().invoke(cli, ["atlas", "--backend", "torch", "--out", str(out)])
    assert res.exit_code == 0, res.output
    real = res.stdout.replace(str(out), "reports/atlas-...").splitlines()
    ids = [e["id"] for e in tomllib.loads(FILE.read_text())["entry"]]
    rows = {next(w for w in line.split() if w in ids): line for line in real[1:-1]}
    assert shown[0].split() == real[0].split()
    at, cut = -1, False
    for line in shown[1:-1]:
        if line == "...":
            cut = True
            continue
        entry = next((w for w in line.split() if w in ids), None)
        assert entry is not None and ids.index(entry) > at, f"unknown or out of order: {line}"
        assert cut or ids.index(entry) == at + 1, f"rows left out before {entry}, no '...'"
        if "not asked for (--backend)" not in rows[entry]:
            assert line.split() == rows[entry].split()
        at, cut = ids.index(entry), False
    assert cut or at == len(ids) - 1, "rows left out at the end, no '...'"
    digits = re.compile(r"\d+")
    assert digits.sub("#", shown[-1]) == digits.sub("#", real[-1])
    assert shown[-1].startswith(f"atlas: {len(ids)} entries: ")


def test_an_unknown_backend_is_refused_before_any_work(tmp_path):
    """--backend names a loss backend or a decoder, as every command's --backend does; a
    typo is one line listing them, and no run folder is written."""
    res = CliRunner().invoke(cli, ["atlas", "--backend", "torhc", "--out", str(tmp_path / "r")])
    assert res.exit_code == 1 and "--backend: expected one of " in res.output
    assert "got 'torhc' (did you mean 'torch'?)" in res.output
    assert not (tmp_path / "r").exists()
