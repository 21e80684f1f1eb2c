"""A fuzz run folder as report context: one row per search (what was tried, for how long, and
what was found), with the shrunk problem and its case file."""
from __future__ import annotations

from pathlib import Path

from ctcbench.fuzz.kind import KIND
from ctcbench.runs.store import RowLog


def context(run_dir: Path, meta: dict, link_base: Path) -> dict:
    """The fuzz page of ``run_dir``."""
    run_dir = Path(run_dir)
    searches = RowLog(run_dir / "rows.jsonl").rows(floats=KIND.floats)
    config = meta.get("config") or {}
    found = [s for s in searches if s.get("found")]
    for s in found:
        case = Path(s.get("case_file") or "")
        s["case_text"] = case.read_text(encoding="utf-8") if case.is_file() else None
        s["case_dir"] = str(case.parent)
    return {"settings": {k: config[k] for k in ("backend", "against", "dtypes") if k in config},
            "searches": searches, "found": found,
            "tried": sum(int(s.get("tried") or 0) for s in searches)}
