"""Loss faults named by cause for ``compare --function``.

A failing row of a user's function keeps, in its ``faults`` field (``rows.jsonl`` only), what
each of its samples says of the common faults (:mod:`ctcbench.caselib.fault_match`): which
samples failed, which fault reproduces each, which faults a right answer rules out. When the
run ends, the faults that explain the function's failing samples and no row rules out are
checked once more against the rows it passed, then named: one line per cause (the table and
the page end with them, ``summary["causes"]``), and each failing row they explain has its
reason lead with the cause's name (also in the ``cause`` column). ``meta.json`` keeps them
(``config.causes``), so ``ctcbench report`` shows what the run said.
"""
from __future__ import annotations

import pandas as pd

from ctcbench.caselib.fault_match import Cause, contradicts, judge_samples, name_causes
from ctcbench.caselib.faults import BY_KEY, inputs_of
from ctcbench.compare.checks import check
from ctcbench.compare.extra import sample_mask
from ctcbench.runtime.status import Status

EVIDENCE = "faults"  # the field of a failing row holding its samples' verdicts
COLUMN = "cause"  # the column naming the causes a failing row's samples show
CONFIG = "causes"  # meta.json config: backend -> {"lines": [...], "rows": {case/dtype: [...]}}


def check_function(backend, prep, ref) -> dict:
    """``check`` of a ``--function`` backend; a mismatch also gets its samples' verdicts."""
    seen = []
    row = check(backend, prep, ref, on_results=seen.append)
    if row["status"] == Status.MISMATCH and seen:
        try:
            row[EVIDENCE] = evidence(prep, seen[0])
        except Exception as exc:  # naming a cause must never cost the row
            row[EVIDENCE] = {"unexamined": f"{type(exc).__name__}: {exc}"}
    return row


def evidence(prep, results) -> dict:
    """A row's verdicts, JSON-ready: ``failing`` sample ids (``"variant:sample"``),
    ``explained`` fault -> {id: form}, ``contradicted`` fault -> count."""
    tol = prep.case.tolerance(prep.dtype)
    failing, explained, contradicted = [], {}, {}
    for i, (v, problem, res) in enumerate(zip(prep.variants, prep.problems, results)):
        sel = sample_mask(prep.case.expect, problem.shape[1])
        for verdict in judge_samples(problem, res.loss, res.grad_logits, tol,
                                     weights=v.run_kwargs.get("grad_weights"), samples=sel,
                                     inputs=inputs_of(problem, v.raw.targets)):
            sid = f"{i}:{verdict.sample}"
            if verdict.failing:
                failing.append(sid)
            for key, form in verdict.explained.items():
                explained.setdefault(key, {})[sid] = form
            for key in verdict.contradicted:
                contradicted[key] = contradicted.get(key, 0) + 1
    return {"failing": failing, "explained": explained, "contradicted": contradicted}


def _latest(rows: list[dict]) -> list[dict]:
    """One row per key, the last written (a resumed run may have written a key twice)."""
    return list({(r.get("backend"), r.get("case"), r.get("dtype"), r.get("device")): r
                 for r in rows}.values())


def find_causes(rows: list[dict], preps: dict, functions) -> dict:
    """``{backend: {"lines": [...], "said": [...], "rows": {"case/dtype": [cause names]}}}``
    for each of ``functions`` whose failing rows name a cause (``said``: the lines as the run
    says them, each led by the function's name when several were checked); ``rows`` as
    ``rows.jsonl`` holds them, ``preps`` the run's prepared cases
    (``compare.checks.prepare_all``)."""
    found = {}
    rows = _latest(rows)
    functions = list(dict.fromkeys(functions))
    for name in functions:
        mine = [r for r in rows if r.get("backend") == name]
        causes, by_row = _causes(mine, preps)
        if causes:
            lines = [c.line() for c in causes]
            found[name] = {"lines": lines,
                           "said": [f"{name}: {line}" for line in lines] if len(functions) > 1
                           else lines,
                           "rows": {k: [c.name for c in causes if c.fault.key in keys]
                                    for k, keys in by_row.items()
                                    if any(c.fault.key in keys for c in causes)}}
    return found


def _causes(rows: list[dict], preps: dict) -> tuple[list[Cause], dict[str, set]]:
    failing, explained, contradicted, by_row = [], {}, {}, {}
    for r in rows:
        ev = r.get(EVIDENCE)
        if r.get("status") != Status.MISMATCH or not isinstance(ev, dict) or "failing" not in ev:
            continue
        where = f"{r['case']}/{r['dtype']}"
        failing += [f"{where}/{sid}" for sid in ev["failing"]]
        for key, samples in ev["explained"].items():
            if key in BY_KEY:
                explained.setdefault(key, {}).update(
                    {f"{where}/{sid}": form for sid, form in samples.items()})
                by_row.setdefault(where, set()).add(key)
        for key, count in ev["contradicted"].items():
            contradicted[key] = contradicted.get(key, 0) + count
    candidates = [k for k in explained if not contradicted.get(k)]
    passed = [preps[r["case"], r["dtype"]] for r in rows
              if r.get("status") == Status.OK and (r.get("case"), r.get("dtype")) in preps]
    for key in candidates:  # the rows it passed: would the fault have shown there?
        contradicted[key] = _contradictions(BY_KEY[key], passed)
    return name_causes(failing, explained, contradicted), by_row


def _contradictions(fault, preps) -> int:
    """Samples of rows the function passed where ``fault`` would have shown (the first
    row that has any ends the search: one rules the fault out)."""
    for prep in preps:
        if not prep.problems:
            continue
        tol = prep.case.tolerance(prep.dtype)
        for v, problem in zip(prep.variants, prep.problems):
            found = contradicts(problem, fault, tol, inputs=inputs_of(problem, v.raw.targets),
                                samples=sample_mask(prep.case.expect, problem.shape[1]))
            if found:
                return found
    return 0


def lead_reasons(df, found: dict):
    """The table ``df`` with each failing row's reason led by the causes its samples show,
    and those causes' names in the ``cause`` column."""
    if not found:
        return df
    return pd.DataFrame(explained_rows(df.to_dict(orient="records"), found),
                        columns=list(df.columns), dtype=object)


def _led(reason, names: list[str]) -> str:
    return " | ".join([*names, reason or ""]).rstrip(" |")


def cause_lines(found: dict) -> list[str]:
    """One line per cause, as the run said it."""
    return [line for entry in found.values() for line in entry.get("said", entry["lines"])]


def saved(meta: dict) -> dict:
    """The causes a run folder's ``meta.json`` recorded (none for a folder from before)."""
    value = (meta or {}).get("config", {}).get(CONFIG)
    return value if isinstance(value, dict) else {}


def explained_rows(rows: list[dict], found: dict) -> list[dict]:
    """``rows`` (dicts, as the page reads them) with the reasons led by their causes."""
    out = []
    for r in rows:
        names = found.get(r.get("backend"), {}).get("rows", {}).get(
            f"{r.get('case')}/{r.get('dtype')}")
        if names and r.get("status") == Status.MISMATCH:
            r = {**r, "reason": _led(r.get("reason"), names),
                 COLUMN: "; ".join(names)}
        out.append(r)
    return out
