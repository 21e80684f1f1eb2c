"""A datasheet run folder as report context: the side-by-side table, then each backend's sheet."""
from __future__ import annotations

from pathlib import Path

from ctcbench.datasheet.axes import AXES
from ctcbench.datasheet.kind import KIND
from ctcbench.datasheet.plot import limits_plot
from ctcbench.datasheet.precision import CLIMBS
from ctcbench.datasheet.sheet import PRECISION_LABELS, sheets, table
from ctcbench.runs.store import RowLog


def backends(run_dir: Path) -> list[str]:
    """The backends ``run_dir`` holds a sheet of, in the order they were run."""
    rows = RowLog(Path(run_dir) / "rows.jsonl").rows()
    return list(dict.fromkeys(r["backend"] for r in rows if r.get("stage") == "info"))


def context(run_dir: Path, meta: dict, link_base: Path, only: str | None = None) -> dict:
    """The datasheet page of ``run_dir``: every backend side by side, or ``only`` that one."""
    rows = RowLog(Path(run_dir) / "rows.jsonl").rows(floats=KIND.floats)
    if only is not None:
        rows = [r for r in rows if r.get("backend") == only]
    sheet = sheets(rows)
    probes = {}  # backend -> dtype -> axis -> [probe rows in the order run]
    for r in rows:
        if r.get("stage") == "probe":
            probes.setdefault(r["backend"], {}).setdefault(r["dtype"], {}) \
                .setdefault(r["axis"], []).append(r)
    plots = {name: {dtype: limits_plot(by_axis, f"{name}, {dtype}: sizes tried per axis")
                    for dtype, by_axis in by_dtype.items()}
             for name, by_dtype in probes.items()}
    return {"table": table(sheet) if sheet else [], "sheets": list(sheet.values()),
            "plots": plots, "climbs": CLIMBS, "precision_labels": PRECISION_LABELS, "axes": {a.name: a.what for a in AXES.values()},
            "config": (meta or {}).get("config") or {}}
