"""How the convergence summary and optimizer tables are written, so that "not reached" is one
value everywhere.

A step a run never reached (no eval with CER < 2%, no plateau end) is a missing value, not a
number: empty in tables and CSV, ``null`` in JSON. Real non-finite results (a diverged run's
NaN loss) stay what they are: ``nan``/``inf`` in tables and CSV, the strings ``"nan"`` and
``"inf"`` in JSON (``ctcbench.files.to_json``).
"""
from __future__ import annotations

import math

import pandas as pd

# columns holding the step at which something was first reached (or a median of such steps)
STEP_COLUMNS = ("plateau_end_step", "steps_to_cer10", "steps_to_cer02", "plateau_end_median",
                "steps_to_cer10_median")


def missing(v) -> bool:
    """None, NaN or pandas' NA."""
    return v is None or v is pd.NA or (isinstance(v, float) and math.isnan(v))


def step_value(v):
    """A reached step as an int (a median of two steps may be a half: kept as a float), a
    never-reached one as None."""
    if missing(v):
        return None
    return int(v) if float(v).is_integer() else float(v)


def records(df: pd.DataFrame) -> list[dict]:
    """Rows for JSON: never-reached steps are None (``null``), reached ones ints."""
    rows = df.to_dict("records")
    for row in rows:
        for col in STEP_COLUMNS:
            if col in row:
                row[col] = step_value(row[col])
    return rows


def with_steps_as_text(df: pd.DataFrame) -> pd.DataFrame:
    """``df`` with its step columns as text: ``"250"``, and ``""`` where never reached."""
    out = df.copy()
    for col in STEP_COLUMNS:
        if col in out:
            out[col] = [("" if missing(v) else f"{step_value(v):g}") for v in out[col]]
    return out


def table(df: pd.DataFrame) -> str:
    """Fixed-width text for people; never-reached steps are blank, numbers in 4 digits."""
    return with_steps_as_text(df).to_string(index=False, float_format=lambda v: f"{v:.4g}")


def to_csv(df: pd.DataFrame, path) -> None:
    """CSV: never-reached steps are empty fields, a real NaN result the word nan."""
    with_steps_as_text(df).to_csv(path, index=False, na_rep="nan")


def grid_output(result, fmt: str) -> str:
    """What ``convergence`` prints for a grid: the runs, each optimizer's verdict at its best
    rate and the pairwise differences (a table), or ``{"runs", "verdicts", "differences"}``."""
    from ctcbench.convergence.verdicts import to_records, verdicts
    from ctcbench.files import to_json
    summary, run_dir = result.rows, result.run_dir
    best, diffs = verdicts(summary)
    if fmt == "json":
        return to_json({"runs": records(summary), "verdicts": to_records(best),
                        "differences": to_records(diffs)}, indent=2)
    cols = ["run", "final_cer", "final_seq_acc", "plateau_end_step", "steps_to_cer10",
            "steps_to_cer02", "cpu_s", "wall_s"]
    parts = [table(summary[cols]), table(best)] + ([table(diffs)] if len(diffs) else [])
    return "\n\n".join(parts) + f"\n\nrun folder: {run_dir}  (plot: {run_dir / 'convergence.png'})"


def scenario_output(result, fmt: str) -> str:
    """What ``convergence --scenario`` prints for its ``ScenarioResult``: per arm, for both
    metrics, the verdicts, the optimizers' differences, the arm against the baseline, the
    doctor's finding counts (a table), or what verdicts.json holds."""
    from ctcbench.files import to_json
    if fmt == "json":
        return to_json(result.summary, indent=2)
    tables = result.tables
    parts = [table(tables["verdicts"])] + [
        table(tables[key]) for key in ("differences", "versus_baseline", "findings")
        if len(tables[key])]
    return ("\n\n".join(parts)
            + f"\n\nscenario folder: {result.run_dir}  (plot: {result.run_dir / 'scenario.png'})")
