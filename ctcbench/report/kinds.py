"""What kind of run a folder holds, and its sidecar.

``meta.json`` may name it (``"kind"``, or ``config.driver``); otherwise a folder is
recognised by its files and rows: ``runs/*/curve.jsonl`` is a convergence grid, rows with
``T``/``cells`` are a bench run, rows with ``case``/``status`` a compare run.
"""
from __future__ import annotations

import json
from pathlib import Path

KINDS = ("compare", "bench", "convergence")


def read_meta(run_dir: Path) -> dict:
    """``meta.json`` as a dict; ``{}`` when the folder has none (an interrupted run)."""
    path = Path(run_dir) / "meta.json"
    if not path.is_file():
        return {}
    try:
        meta = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ValueError(f"RUN_DIR {run_dir}: expected meta.json to hold JSON, got {exc}") from None
    return meta if isinstance(meta, dict) else {}


def _first_row(path: Path) -> dict:
    if not path.is_file():
        return {}
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            continue
        if isinstance(row, dict):
            return row
    return {}


def run_kind(run_dir: Path, meta: dict | None = None) -> str:
    """``"compare"``, ``"bench"`` or ``"convergence"``; ValueError naming the folder otherwise."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"RUN_DIR: expected a run folder, got {str(run_dir)!r} "
                                f"({'a file' if run_dir.exists() else 'no such folder'})")
    meta = read_meta(run_dir) if meta is None else meta
    config = meta.get("config") if isinstance(meta.get("config"), dict) else {}
    for said in (meta.get("kind"), config.get("driver")):
        if said in KINDS:
            return said
    if set(config) >= {"base", "grid"} or any((run_dir / "runs").glob("*/curve.jsonl")):
        return "convergence"
    row = _first_row(run_dir / "rows.jsonl")
    if "sizes" in config or {"T", "cells"} <= set(row):
        return "bench"
    if {"case", "status"} <= set(row):
        return "compare"
    raise ValueError(f"RUN_DIR {run_dir}: expected a compare, bench or convergence run folder "
                     f"(meta.json with a kind, rows.jsonl, or runs/*/curve.jsonl), got none")
