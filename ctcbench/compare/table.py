"""The ``compare`` rows as a table: tidy DataFrame, CSV/JSON spellings, summary and verdict."""
from __future__ import annotations

import math

import pandas as pd

from ctcbench.compare.checks import COLUMNS
from ctcbench.runtime.status import CHECKED, FAILING, ORDER, Status
from ctcbench.compare.extra import API
from ctcbench.compare.kind import KEY


def tidy(rows: list[dict]) -> pd.DataFrame:
    """Rows as a DataFrame with every column, one row per key, failures first. Columns hold
    objects, so a value that does not apply (None) stays apart from a NaN result."""
    df = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=list(COLUMNS),
                      dtype=object)
    df = df.drop_duplicates(subset=list(KEY), keep="last")
    rank = df["status"].map({s: i for i, s in enumerate(ORDER)})
    df = df.assign(_rank=rank).sort_values(["_rank", "backend", "case", "dtype"], kind="stable")
    return df.drop(columns="_rank").reset_index(drop=True)


def df_records(df: pd.DataFrame) -> list[dict]:
    """JSON-ready rows: not applicable is None (null); ``to_json`` spells NaN and inf as the
    strings "nan" and "inf"."""
    return df.to_dict(orient="records")


def to_csv(df: pd.DataFrame) -> str:
    """The rows as CSV: not applicable is an empty field, a NaN result the word nan."""
    spelled = df.map(lambda v: "nan" if isinstance(v, float) and math.isnan(v) else v)
    return spelled.to_csv(index=False)


def summarize(df: pd.DataFrame, run_dir=None) -> dict:
    """Counts per status and the failing rows; ``failed`` is what a CI gate checks: true on
    any failing row, and when no row was checked at all (``checked`` is 0)."""
    counts = {s: int((df["status"] == s).sum()) for s in ORDER}
    failing = df[df["status"].isin(FAILING)]
    checked = int((df["status"].isin(CHECKED) & (df["backend"] != API)).sum())  # the API's own
    # refusals of bad input are no check of a backend: a gate on them alone must not pass
    return {"failed": bool(len(failing)) or checked == 0, "checked": checked, "counts": counts,
            "failing": [f"{r.backend}/{r.case}/{r.dtype}" for r in failing.itertuples()],
            "failing_cases": sorted(set(failing["case"])),
            "run_dir": None if run_dir is None else str(run_dir)}


def tally(df: pd.DataFrame) -> list[tuple[str, str]]:
    """The run's counts as people read them, the terminal's summary line and the page's chips
    alike: ``(status, words)`` per status of the backends' rows, in ``ORDER`` ("28 ok"), then
    the input checks ("20 of 20 input checks ok", status ok when all passed, else mismatch)."""
    checks = df["backend"] == API  # rows of no backend: the input validation's own checks
    found = [(k, f"{n} {k}") for k in ORDER if (n := int((df["status"][~checks] == k).sum()))]
    if checks.any():
        passed, total = int((df["status"][checks] == Status.OK).sum()), int(checks.sum())
        found.append((Status.OK if passed == total else Status.MISMATCH,
                      f"{passed} of {total} input checks ok"))
    return found


def nothing_checked(summary: dict) -> str | None:
    """Why a run that checked no row cannot pass, or None when some row was checked."""
    if summary["checked"]:
        return None
    counts = ", ".join(f"{n} {k}" for k, n in summary["counts"].items() if n)
    return "nothing was checked: " + (f"no backend ran on any case ({counts})" if counts else
                                      "no case offers the selected dtypes")


def _fmt(x, spec: str) -> str:
    if x is None:  # does not apply
        return "-"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return format(x, spec)


def _sample(row: dict) -> str | None:
    """The worst sample's index, with its variant where that is not the case as written."""
    n, variant = row.get("sample"), row.get("sample_variant")
    if n is None or (isinstance(n, float) and math.isnan(n)):
        return None
    return f"{int(n)}" if variant in (None, "base") else f"{int(n)} ({variant})"


def format_table(df: pd.DataFrame, *, run_dir=None, summary: dict | None = None,
                 reason_width: int = 70) -> str:
    """A compact table for people, failures first, and a one-line summary at the end. The
    loss columns are one sample's, the one furthest out of tolerance (``sample``: its index,
    and its variant's label where it is not the case as written); the batch's sums are in the
    JSON and CSV only (``loss``, ``expected_loss``)."""
    cols = [("status", "status", "s"), ("backend", "backend", "s"), ("case", "case", "s"),
            ("dtype", "dtype", "s"), ("device", "dev", "s"), ("sample", "sample", "s"),
            ("sample_loss", "loss", ".6g"), ("sample_expected", "expected", ".6g"),
            ("sample_err", "loss_err", ".1e"), ("grad_err", "grad_err", ".1e"),
            ("ref_grad_err", "ref_grad", ".1e"), ("time_s", "ms", ".1f"),
            ("reason", "reason", "s")]
    cells = []
    for r in df.to_dict(orient="records"):
        line = []
        for key, _, spec in cols:
            v = _sample(r) if key == "sample" else r.get(key)
            if key == "time_s" and v is not None and not (isinstance(v, float) and math.isnan(v)):
                v = v * 1e3
            text = _fmt(v, spec) if spec != "s" else ("" if v is None else str(v))
            if key == "reason" and len(text) > reason_width and r.get("status") != Status.SKIPPED:
                text = text[: reason_width - 3] + "..."  # a skip's install hint stays whole
            line.append(text)
        cells.append(line)
    heads = [h for _, h, _ in cols]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(heads)]
    right = {"loss", "expected", "loss_err", "grad_err", "ref_grad", "ms"}

    def fmt_line(items):
        return "  ".join((s.rjust(w) if h in right else s.ljust(w))
                         for s, w, h in zip(items, widths, heads)).rstrip()
    lines = [fmt_line(heads)] + [fmt_line(c) for c in cells]
    s = summary if summary is not None else summarize(df, run_dir)  # compare's, with what
    # --save-baseline and --baseline found, said before the verdict they are part of
    lines += [line for line in [s.get("baseline_saved")] + baseline_lines(s) if line]
    lines += [f"known issue no longer reproduces: {line}" for line in s.get("stale_known", [])]
    lines += [f"regression: {line}" for line in s.get("regressions", [])]
    lines += s.get("causes", [])  # the loss faults named (compare.causes), one line each
    lines += s.get("slow", [])  # a function's cases skipped as predicted slow (compare.slow)
    counts = ", ".join(words for _, words in tally(df))
    verdict = "FAILED" if s["failed"] else "passed"
    tail = f"compare {verdict}: {counts or 'no rows'}"
    if nothing_checked(s):
        tail += f"; {nothing_checked(s)}"
    if s.get("baseline", {}).get("moved"):
        tail += "; the numbers moved from --baseline"
    elif s.get("baseline", {}).get("failed"):
        tail += "; no row of --baseline was run"
    if s["failing_cases"]:
        tail += f"; failing cases: {', '.join(s['failing_cases'])}"
    if s["run_dir"]:
        tail += f"; results in {s['run_dir']}"
    return "\n".join(lines + [tail])


def baseline_lines(summary) -> list[str]:
    """What ``--baseline`` found: the rows that moved, then what was compared."""
    found = summary.get("baseline")
    if found is None:
        return []
    verdict = (f"baseline FAILED: {len(found['moved'])} rows moved" if found["moved"]
               else "baseline FAILED: none of its rows is in this run (other backends, cases "
                    "or dtypes)" if found.get("failed") else "baseline ok: nothing moved")
    return [*(f"moved  {m}" for m in found["moved"]), f"{verdict}; {found['compared']}"]
