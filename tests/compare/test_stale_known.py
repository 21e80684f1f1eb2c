"""A known issue that no longer reproduces is said, not failed: a correct CTC function whose
known_issues.toml still lists a case it now passes, beside its planted-bug twin, for which the
listed case still fails (the known answer is the oracle of both)."""
from __future__ import annotations

import shutil
from pathlib import Path

from ctcbench.compare.run import compare
from ctcbench.compare.table import format_table

IMPLEMENTATIONS = Path(__file__).parents[1] / "implementations"


def test_a_passing_row_a_known_issue_claims_is_said_and_does_not_fail(tmp_path, monkeypatch):
    shutil.copy(IMPLEMENTATIONS / "numpy_ctc.py", tmp_path / "mine.py")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    (tmp_path / "known.toml").write_text("format = 1\n" + "".join(
        f'[[issue]]\nbackend = "mine:{fn}"\ncases = ["repeat_perfect_vs_blank"]\n'
        f'dtypes = ["*"]\nreason = "equal labels merge"\nseen_with = "mine 0.1"\n'
        for fn in ("ctc_loss", "ctc_loss_skips_repeats")))
    result = compare(None, ["repeat_perfect_vs_blank"], ["float64"], out=tmp_path / "run",
                     functions=["mine:ctc_loss", "mine:ctc_loss_skips_repeats"],
                     convention="numpy", known_issues=tmp_path / "known.toml", progress=False,
                     plot=False)
    status = {r["backend"]: r["status"] for r in result.rows.to_dict("records")}
    assert status == {"mine:ctc_loss": "ok", "mine:ctc_loss_skips_repeats": "known"}
    stale = result.summary["stale_known"]
    assert len(stale) == 1 and stale[0].startswith(
        "mine:ctc_loss/repeat_perfect_vs_blank/float64: listed as known (equal labels merge)")
    assert not result.summary["failed"]
    assert f"known issue no longer reproduces: {stale[0]}" in format_table(
        result.rows, summary=result.summary)
