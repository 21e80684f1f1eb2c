"""An atlas run folder as report context: one row per entry, grouped by status."""
from __future__ import annotations

from pathlib import Path

from ctcbench.atlas.kind import KIND
from ctcbench.runs.store import RowLog


def context(run_dir: Path, meta: dict, link_base: Path) -> dict:
    """The atlas page of ``run_dir``."""
    rows = RowLog(Path(run_dir) / "rows.jsonl").rows(floats=KIND.floats)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.get("status")] = counts.get(r.get("status"), 0) + 1
    return {"rows": rows, "counts": counts}
