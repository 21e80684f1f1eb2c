"""A known issue that no longer reproduces is said, not failed: a correct CTC function whose
known_issues.toml still lists a case it now passes, beside its planted-bug twin, for which the
listed case still fails (the known answer is the oracle of both). And a row that still fails
although its atlas entry says a release at or below the installed one fixed it is a
regression."""
from __future__ import annotations

import importlib.metadata
import json
import shutil
import tomllib
from pathlib import Path

import pytest

from ctcbench.caselib.known import load_atlas
from ctcbench.compare.run import compare
from ctcbench.compare.stale import regressions
from ctcbench.compare.table import df_records, format_table

IMPLEMENTATIONS = Path(__file__).parents[1] / "implementations"
ATLAS = Path(__file__).resolve().parents[2] / "cases" / "atlas.toml"


def compare_under_known_issues(tmp_path, monkeypatch, claimed: str, cases: list[str]):
    """compare of a correct CTC function and its planted-bug twin (equal labels not merged)
    on ``cases`` (float64), each under a known issue claiming the cases ``claimed``."""
    shutil.copy(IMPLEMENTATIONS / "numpy_ctc.py", tmp_path / "mine.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    (tmp_path / "known.toml").write_text("format = 1\n" + "".join(
        f'[[issue]]\nbackend = "mine:{fn}"\ncases = ["{claimed}"]\n'
        f'dtypes = ["*"]\nreason = "equal labels merge"\nseen_with = "mine 0.1"\n'
        for fn in ("ctc_loss", "ctc_loss_skips_repeats")))
    return compare(None, cases, ["float64"], out=tmp_path / "run",
                   functions=["mine:ctc_loss", "mine:ctc_loss_skips_repeats"],
                   convention="numpy", known_issues=tmp_path / "known.toml", progress=False,
                   plot=False)


def test_a_passing_row_a_known_issue_claims_is_said_and_does_not_fail(tmp_path, monkeypatch):
    result = compare_under_known_issues(tmp_path, monkeypatch, "repeat_perfect_vs_blank",
                                        ["repeat_perfect_vs_blank"])
    status = {r["backend"]: r["status"] for r in result.rows.to_dict("records")}
    assert status == {"mine:ctc_loss": "ok", "mine:ctc_loss_skips_repeats": "known"}
    stale = result.summary["stale_known"]
    assert len(stale) == 1 and stale[0].startswith(
        "mine:ctc_loss/repeat_perfect_vs_blank/float64: listed as known (equal labels merge)")
    assert not result.summary["failed"]
    assert f"known issue no longer reproduces: {stale[0]}" in format_table(
        result.rows, summary=result.summary)


def test_a_known_row_whose_atlas_entry_is_fixed_in_an_older_release_is_a_regression(
        tmp_path, monkeypatch):
    """optax's negative float32 loss, a real row that is `known` here, against tables where
    its atlas entry says it was fixed before, at, after the installed optax, or by a PR: only
    the first two are regressions. The installed release is read here with importlib."""
    pytest.importorskip("optax")
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    case, entry_id = "optax_negative_loss_near_certain", "optax-negative-float32-loss"
    result = compare(["optax"], [case], ["float32"], out=tmp_path / "run", progress=False,
                     plot=False)
    rows = df_records(result.rows)
    if [r["status"] for r in rows] != ["known"]:
        pytest.skip(f"optax/{case}/float32 does not fail here: {rows}")
    raw = next(e for e in tomllib.loads(ATLAS.read_text())["entry"] if e["id"] == entry_id)
    assert raw.get("fixed_in") is None  # optax#1771 is open: the built-in atlas flags nothing
    assert result.summary["regressions"] == []
    installed = importlib.metadata.version("optax")
    major, minor, micro = (int(n) for n in installed.split(".")[:3])
    fixed = {"older": "optax 0.0.1", "same": f"optax {installed}",
             "newer": f"optax {major}.{minor}.{micro + 1}",
             "pr": "google-deepmind/optax PR#1783"}
    text = "format = 1\n"
    for k, v in fixed.items():
        entry = {**raw, "id": entry_id if k == "older" else f"{entry_id}-{k}", "fixed_in": v}
        text += "[[entry]]\n" + "".join(f"{key} = {json.dumps(val)}\n"
                                        for key, val in entry.items())
    (tmp_path / "atlas.toml").write_text(text)
    lines = regressions(rows, entries=load_atlas(tmp_path / "atlas.toml"))
    row = f"optax/{case}/float32"
    assert lines == [f"{entry_id}: fixed in optax 0.0.1 per {raw['url']}, reproduces on optax "
                     f"{installed} (rows {row})",
                     f"{entry_id}-same: fixed in optax {installed} per {raw['url']}, reproduces "
                     f"on optax {installed} (rows {row})"]


def test_an_issue_claiming_rows_by_a_pattern_is_said_once_and_only_when_none_fails(
        tmp_path, monkeypatch):
    """Known issues claiming every case by a pattern, as a precision bug that shows on some
    cases only is listed: the planted-bug twin fails on the case with repeated labels and
    passes on the one without, so its bug is there and nothing is said of its passing row;
    the correct function passes both, and its issue is said once, not once a row."""
    cases = ["repeat_perfect_vs_blank", "optax_one_to_one_alignment"]
    result = compare_under_known_issues(tmp_path, monkeypatch, "*", cases)
    status = {(r["backend"], r["case"]): r["status"] for r in result.rows.to_dict("records")}
    assert status == {("mine:ctc_loss", cases[0]): "ok", ("mine:ctc_loss", cases[1]): "ok",
                      ("mine:ctc_loss_skips_repeats", cases[0]): "known",
                      ("mine:ctc_loss_skips_repeats", cases[1]): "ok"}
    stale = result.summary["stale_known"]
    assert len(stale) == 1 and stale[0].startswith("mine:ctc_loss ("), stale
    assert "listed as known (equal labels merge) but all 2 rows it claims pass" in stale[0]
    assert all(f"{case}/float64" in stale[0] for case in cases)
    assert not result.summary["failed"]
