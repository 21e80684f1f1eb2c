"""Run folders: tidy rows written as they are produced, plus a metadata sidecar.

A run folder holds ``rows.jsonl`` (one JSON object per line, appended and flushed as each
row is finished, so an interrupted run keeps what it did and can resume), ``meta.json``
(environment and configuration) and whatever tables and plots the driver exports.
"""
from __future__ import annotations

import datetime as _dt
import json
import math
from pathlib import Path

import numpy as np

from ctcbench.environment import environment

DEFAULT_REPORTS = Path("reports")


def new_run_dir(kind: str, out: str | Path | None = None) -> Path:
    """``out`` if given, else ``reports/<kind>-<UTC timestamp>``; created."""
    if out is None:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
        out = DEFAULT_REPORTS / f"{kind}-{stamp}"
    path = Path(out)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file in the way, no permission
        raise ValueError(f"--out: expected a folder that exists or can be created, got "
                         f"{str(out)!r} ({exc.strerror})") from None
    return path


def read_text(path: Path, what: str) -> str:
    """A text file's contents (UTF-8, a byte-order mark dropped), or a ValueError naming
    ``what`` ("grid sizes.csv") when it is not text."""
    try:
        return Path(path).read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ValueError(f"{what}: expected a UTF-8 text file, got undecodable bytes at "
                         f"position {exc.start}") from None


def _jsonable(x):
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.generic):
        x = x.item()
    if isinstance(x, float) and not math.isfinite(x):
        return str(x)  # "inf", "-inf", "nan": JSON has no such numbers
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    return x


def to_json(obj, **kwargs) -> str:
    """JSON with inf/nan spelled as strings and NumPy scalars unwrapped."""
    return json.dumps(_jsonable(obj), **kwargs)


def write_meta(run_dir: Path, config: dict, extra_packages=()) -> dict:
    meta = {"config": config, "environment": environment(extra_packages)}
    (run_dir / "meta.json").write_text(to_json(meta, indent=2) + "\n")
    return meta


class RowLog:
    """Append-only JSONL log of result rows; ``done()`` tells what a resumed run can skip."""

    def __init__(self, path: Path):
        self.path = Path(path)

    def append(self, row: dict) -> None:
        with self.path.open("a") as f:
            f.write(to_json(row) + "\n")
            f.flush()

    def rows(self, floats=()) -> list[dict]:
        """The rows written so far; in the fields named in ``floats``, the strings "inf",
        "-inf" and "nan" that ``to_json`` wrote are floats again, as in a fresh row."""
        if not self.path.exists():
            return []
        rows = []
        for line in self.path.read_text().splitlines():
            try:
                row = json.loads(line)
            except json.JSONDecodeError:  # a line cut by an interruption
                continue
            for key in floats:
                if row.get(key) in ("inf", "-inf", "nan"):
                    row[key] = float(row[key])
            rows.append(row)
        return rows

    def done(self, *key_fields: str) -> set[tuple]:
        return {tuple(r.get(k) for k in key_fields) for r in self.rows()}
