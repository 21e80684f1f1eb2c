"""A compare run folder as report context: the summary, a case x backend matrix coloured by
status (failures first), each cell's numbers per dtype, the margins plot, the environment."""
from __future__ import annotations

import json
from pathlib import Path

# the tolerance fields a cell shows, read from the case library when the case is there
TOLERANCE_FIELDS = ("loss_atol", "loss_rtol", "grad_atol")


def _rows(run_dir: Path) -> list[dict]:
    from ctcbench.compare.checks import NUMBERS
    from ctcbench.runs.store import RowLog
    rows = RowLog(run_dir / "rows.jsonl").rows(floats=NUMBERS)
    if not rows and (run_dir / "rows.json").is_file():
        rows = json.loads((run_dir / "rows.json").read_text(encoding="utf-8"))
    return rows


def _tolerances(case_names, dtypes) -> dict:
    """(case, dtype) -> {loss_atol, loss_rtol, grad_atol} for cases found in the built-in
    library (a run over other case files shows no tolerance)."""
    try:
        from ctcbench.caselib.library import load_cases
        cases = {c.name: c for c in load_cases()}
    except Exception:  # an unreadable library must not stop the report
        return {}
    out = {}
    for name in case_names:
        for dtype in dtypes:
            if name in cases:
                try:
                    tol = cases[name].tolerance(dtype)
                except Exception:
                    continue
                out[name, dtype] = {k: getattr(tol, k) for k in TOLERANCE_FIELDS}
    return out


def compare_context(run_dir: Path, meta: dict) -> dict:
    from ctcbench.compare.checks import FAILING, STATUS_ORDER
    from ctcbench.compare.table import summarize, tidy
    run_dir = Path(run_dir)
    df = tidy(_rows(run_dir))
    summary = summarize(df)
    records = df.to_dict(orient="records")  # None: does not apply; NaN: a NaN result
    rank = {s: i for i, s in enumerate(STATUS_ORDER)}
    config = meta.get("config", {})
    per_backend = [r for r in records if r["case"] == "*"]  # skipped / failed to load
    cells = [r for r in records if r["case"] != "*"]
    backends = [b for b in dict.fromkeys(list(config.get("backends", [])) +
                                         [r["backend"] for r in cells])
                if any(r["backend"] == b for r in cells)]
    tolerances = _tolerances({r["case"] for r in cells}, {r["dtype"] for r in cells})
    matrix: dict[str, dict] = {}
    for r in cells:
        r["tolerance"] = tolerances.get((r["case"], r["dtype"]))
        cell = matrix.setdefault(r["case"], {"family": r.get("family") or "", "cells": {}})
        cell["cells"].setdefault(r["backend"], []).append(r)
    rows = []
    for case, entry in matrix.items():
        by_backend = {}
        for backend, rs in entry["cells"].items():
            rs.sort(key=lambda r: (rank.get(r["status"], 99), r["dtype"]))
            worst = rs[0]["status"]
            bad = sum(r["status"] == worst for r in rs)
            by_backend[backend] = {"status": worst, "rows": rs, "failing": worst in FAILING,
                                   "label": worst if bad == len(rs) else f"{worst} {bad}/{len(rs)}"}
        worst_rank = min(rank.get(c["status"], 99) for c in by_backend.values())
        rows.append({"case": case, "family": entry["family"], "cells": by_backend,
                     "rank": worst_rank, "failing": worst_rank < len(FAILING)})
    rows.sort(key=lambda r: (r["rank"], r["family"], r["case"]))
    from ctcbench.report.figures import compare_margins
    margins = compare_margins(cells)
    versions = config.get("backend_versions", {})
    return {"summary": summary, "backends": backends, "matrix": rows,
            "not_run": per_backend, "margins": margins, "versions": versions,
            "counts": {s: n for s, n in summary["counts"].items() if n},
            "failing": set(FAILING)}
