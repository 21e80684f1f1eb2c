"""Compare a bench run with a saved one and find regressions (``--fail-on time:20%``)."""
from __future__ import annotations

import csv
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from ctcbench.bench.kind import KEY
from ctcbench.errors import fail
from ctcbench.runs.store import RowLog
from ctcbench.files import read_text
from ctcbench.runtime.status import Status

# metric name on the command line -> row field, unit for messages
METRICS = {"time": ("time_median_s", "s"), "ratio": ("ratio_to_torch", "x torch"),
           "memory": ("peak_rss_mb", "MiB")}


@dataclass(frozen=True)
class FailOn:
    metric: str
    limit: float  # allowed relative increase, 0.2 for 20%

    def __str__(self) -> str:
        return f"{self.metric}:{self.limit * 100:g}%"


def parse_fail_on(spec: str) -> FailOn:
    """``"time:20%"`` -> ``FailOn("time", 0.2)``."""
    m = re.fullmatch(r"\s*(\w+)\s*:\s*([0-9]*\.?[0-9]+)\s*%?\s*", spec or "")
    if not m or m.group(1) not in METRICS:
        fail("fail-on", f"METRIC:PCT with METRIC one of {', '.join(METRICS)} and PCT like 20%",
             repr(spec))
    return FailOn(m.group(1), float(m.group(2)) / 100)


def load_rows(path) -> list[dict]:
    """Rows of a saved run: its folder, its ``rows.jsonl``, or an exported JSON/CSV table."""
    path = Path(path)
    if path.is_dir():
        path = path / "rows.jsonl"
    if not path.is_file():
        fail("baseline", "a bench run folder or its rows.jsonl, bench.json or bench.csv",
             f"{str(path)!r} (no such file)")
    text = read_text(path, f"baseline {path}")
    if path.suffix == ".jsonl":
        rows = RowLog(path).rows()
    elif path.suffix == ".json":
        try:
            rows = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f"baseline {path}: expected JSON, got a parse error ({exc})") from None
    else:
        rows = list(csv.DictReader(text.splitlines()))
    needed = set(KEY) - {"threads", "beam"}  # rows saved before "threads" ran on 1 thread;
    # "beam" is a decoder row's (a baseline holds losses)
    if not isinstance(rows, list) or not all(isinstance(r, dict) and needed <= set(r)
                                             for r in rows) or not rows:
        raise ValueError(f"baseline {path}: expected bench rows with fields "
                         f"{', '.join(k for k in KEY if k in needed)}, got {len(rows) if isinstance(rows, list) else 0} "
                         f"usable rows")
    for i, row in enumerate(rows):
        try:
            _key(row)
        except (TypeError, ValueError):
            raise ValueError(f"baseline {path} row {i + 1}: expected integers for T, N, C, L, "
                             f"got { {k: row[k] for k in 'TNCL'} }") from None
    return rows


def _where(row: dict) -> str:
    return (f"{row['backend']} at T={row['T']} N={row['N']} C={row['C']} L={row['L']} "
            f"{row['dtype']}")


def check_gated(rows: list[dict], fail_on, source) -> None:
    """Every ``ok`` baseline row holds a positive number for each ``fail_on`` metric, else
    ValueError naming the row: a gate that compares nothing must fail, and before any timing."""
    for i, row in enumerate(rows):
        if row.get("status", Status.OK) != Status.OK:
            continue
        for rule in fail_on:
            field, _ = METRICS[rule.metric]
            value = _number(row.get(field))
            if value is None or value <= 0:
                raise ValueError(f"baseline {source} row {i + 1} ({_where(row)}): expected a "
                                 f"positive number in {field} for --fail-on {rule}, got "
                                 f"{row.get(field)!r}")


def _key(row: dict) -> tuple:
    return (str(row["backend"]), *(int(row[k]) for k in "TNCL"), str(row["dtype"]),
            int(row.get("threads") or 1))


def _number(x) -> float | None:
    try:
        x = float(x)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def compare(rows: list[dict], baseline: list[dict], fail_on=()) -> list[str]:
    """Add ``baseline_<metric>`` and ``change_<metric>`` (relative) to ``rows`` in place and
    return one message per regression beyond a ``fail_on`` limit."""
    old_rows = {_key(r): r for r in baseline}
    messages, matched = [], 0
    for row in rows:
        old = old_rows.get(_key(row))
        if old is None:
            continue
        matched += 1
        if row.get("status") == Status.OK:  # a rule that can compare nothing here fails
            for rule in fail_on:
                field, _ = METRICS[rule.metric]
                for which, value in (("the baseline", old.get(field)), ("this run", row.get(field))):
                    if (_number(value) or 0) <= 0:
                        messages.append(f"fail-on {rule}: expected a positive number in {field} "
                                        f"of {which} for {_where(row)}, got {value!r}")
        if row.get("status") != Status.OK:  # a backend that stopped working is the worst regression
            if fail_on and old.get("status") == Status.OK and row.get("status") != Status.SKIPPED:
                messages.append(
                    f"{row['status']}: {row['backend']} at T={row['T']} N={row['N']} "
                    f"C={row['C']} L={row['L']} {row['dtype']} was ok in the baseline "
                    f"({row.get('reason')})")
            continue
        for metric, (field, unit) in METRICS.items():
            new_v, old_v = _number(row.get(field)), _number(old.get(field))
            if new_v is None or old_v is None or old_v <= 0:
                continue
            change = new_v / old_v - 1
            row[f"baseline_{metric}"] = old_v
            row[f"change_{metric}"] = change
            for rule in fail_on:
                if rule.metric == metric and change > rule.limit:
                    messages.append(
                        f"{metric} regression: {row['backend']} at T={row['T']} N={row['N']} "
                        f"C={row['C']} L={row['L']} {row['dtype']}: {old_v:.4g} -> {new_v:.4g} "
                        f"{unit} ({change:+.1%}, limit +{rule.limit:.0%})")
    if fail_on and not matched:  # a gate that compared nothing must not pass
        messages.append("fail-on: expected the baseline to hold some backend, size and dtype of "
                        "this run, got none in common (another grid or --dtype?)")
    return messages
