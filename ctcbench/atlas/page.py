"""An atlas run folder as report context: one row per entry, grouped by status."""
from __future__ import annotations

import json
from pathlib import Path

from ctcbench.atlas.kind import KIND, UNTRIED
from ctcbench.runs.store import RowLog


def context(run_dir: Path, meta: dict, link_base: Path) -> dict:
    """The atlas page of ``run_dir``."""
    rows = RowLog(Path(run_dir) / "rows.jsonl").rows(floats=KIND.floats)
    counts: dict[str, int] = {}
    for r in rows:
        counts[r.get("status")] = counts.get(r.get("status"), 0) + 1
    versions = Path(run_dir) / "versions.json"  # the release matrix, where --versions made one
    matrices = json.loads(versions.read_text(encoding="utf-8")) if versions.is_file() else {}
    for m in matrices.values():
        m["entries"] = sorted({k for t in m["versions"].values() for k in t if k != "release"})
    regressions = [r for r in rows if r.get("regression")]  # reproduces although fixed
    return {"rows": rows, "counts": counts, "versions": matrices, "regressions": regressions,
            "untried": list(UNTRIED)}
