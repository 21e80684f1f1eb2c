"""The ``atlas`` driver: each entry of the atlas tried on the installed stack.

An entry with a library case (``backend``, ``case``, ``dtype``; a decoder and a case of
``cases/decoders/`` for a decoder's bug) is run exactly as ``compare`` runs it, one compare
run per backend in the folder's ``compare/<backend>``: a failing row
(``known``, ``mismatch``, ``error``, ``crashed``, ``timeout``) means the bug *reproduces*, an
``ok`` row that it is *fixed* here, a ``skipped`` or ``unsupported`` row that it *cannot be
tried* here (the row's reason says why: no GPU, a package missing). An entry with a probe is
tried by ``ctcbench.atlas.probes``. An entry with neither is *not tried*: ``gpu only``, or
``cannot try`` with its ``not_tried`` reason, or ``no case``. An entry that reproduces although
its ``fixed_in`` names a release at or below the installed one is a *regression*
(``ctcbench.compare.stale.fixed_in_check``): its row's ``regression``, and
``summary["regressions"]``.
"""
from __future__ import annotations

import math
import sys

import pandas as pd

from ctcbench.atlas.kind import KIND, UNTRIED, Outcome
from ctcbench.atlas.probes import try_probes
from ctcbench.atlas.versions import DEFAULT_CACHE, parse_versions, version_matrix
from ctcbench.caselib.known import load_atlas
from ctcbench.compare.run import compare
from ctcbench.compare.stale import fixed_in_check
from ctcbench.files import atomic_write, to_json
from ctcbench.runs.store import RunResult, check_out, open_run
from ctcbench.errors import one_of
from ctcbench.runtime.decoders import decoder_names
from ctcbench.runtime.registry import backend_names
from ctcbench.runtime.status import FAILING, Status

_FAILED = (Status.KNOWN, *FAILING)  # compare's rows that show the bug: failing, or failing as known


def _status(row: dict | None) -> tuple[str, str]:
    """An entry's status and reason from its compare row."""
    if row is None:
        return Outcome.CANNOT_TRY, "compare wrote no row for it"
    if row["status"] in _FAILED:
        return Outcome.REPRODUCES, f"{row['status']}: {row.get('reason') or ''}".strip()
    if row["status"] == Status.OK:
        return Outcome.FIXED, "the compare row is ok"
    return Outcome.CANNOT_TRY, f"{row['status']}: {row.get('reason') or ''}".strip()


def _untried(entry) -> dict:
    if entry.not_tried:
        return {"status": Outcome.CANNOT_TRY, "reason": entry.not_tried}
    if entry.device == "gpu":
        return {"status": Outcome.GPU_ONLY, "reason": "a CUDA/cuDNN path that no case of the "
                "library reaches"}
    return {"status": Outcome.NO_CASE, "reason": "no case of the library shows it"}


def atlas(backends=None, *, out=None, resume: bool = False, entries=None, versions=(),
          versions_cache=None) -> RunResult:
    """Try every atlas entry (``entries``, default the built-in atlas) on this stack.

    ``backends``: only entries of these backends are run; the others are ``cannot try``
    ("not asked for"). ``out`` / ``resume``: the run-folder rules of every driver.
    ``versions``: ``"DIST=V1,V2"`` specs (``ctcbench.atlas.versions``): the entries of that
    framework tried again on each release, installed into ``versions_cache``; the matrix goes
    to ``versions.json`` and ``summary["versions"]``.
    Returns a ``RunResult`` with one row per entry; ``summary`` counts each status.
    """
    for spec in versions:
        parse_versions(spec)  # a bad spec is refused before any work
    one_of("--backend", backends or (), [*backend_names(), *decoder_names()])
    check_out(KIND, out, resume=resume)
    entries = load_atlas() if entries is None else tuple(entries)
    with open_run(KIND, out, resume=resume) as run:
        kept = run.keep_rows(lambda r: True)
        done = {r.get("id") for r in kept}
        todo = [e for e in entries if e.id not in done]
        run.write_meta({"driver": "atlas", "backends": list(backends or []),
                        "entries": len(entries), "resumed_rows": len(kept)})
        by_backend: dict[str, list] = {}
        for e in todo:
            if e.case is not None and (not backends or e.backend in backends):
                by_backend.setdefault(e.backend, []).append(e)
        probed = try_probes([e for e in todo if e.probe is not None
                             and (not backends or e.backend in backends)])
        found: dict[tuple, dict] = {}
        decoders = set(decoder_names())
        for name, group in by_backend.items():
            sub = run.run_dir / "compare" / name
            cases = sorted({e.case for e in group})
            if name in decoders:  # a decoder's entry: its row on a decoder case
                result = compare(None, cases, decoders=[name], out=sub, resume=sub.exists(),
                                 progress=False, plot=False)
            else:
                result = compare([name], cases, sorted({e.dtype for e in group}), out=sub,
                                 resume=sub.exists(), progress=False, plot=False)
            for r in result.rows.to_dict("records"):
                found[r["backend"], r["case"], r["dtype"]] = r
                if r["case"] == "*":  # the backend cannot run here
                    for e in group:
                        found.setdefault((name, e.case, e.dtype), r)
        rows = []
        for e in todo:
            row = {"id": e.id, "implementation": e.implementation, "device": e.device,
                   "backend": e.backend, "case": e.case, "dtype": e.dtype, "probe": e.probe,
                   "problem": e.problem, "source": e.source, "url": e.url,
                   "known_in": e.known_in, "fixed_in": e.fixed_in,
                   "upstream_state": e.upstream_state, "checked": e.checked,
                   "upstream_note": e.upstream_note, "regression": None,
                   "fixed_in_check": None}
            if not e.tryable:
                row.update(_untried(e))
            elif backends and e.backend not in backends:
                row.update(status=Outcome.CANNOT_TRY, reason="not asked for (--backend)")
            elif e.probe is not None:
                status, reason = probed[e.id]
                row.update(status=status, reason=reason)
            else:
                status, reason = _status(found.get((e.backend, e.case, e.dtype)))
                row.update(status=status, reason=reason)
            if row["status"] == Outcome.REPRODUCES:
                row["regression"], row["fixed_in_check"] = fixed_in_check(e)
            run.log.append(row)
            rows.append(row)
        order = {e.id: i for i, e in enumerate(entries)}
        all_rows = sorted(kept + rows, key=lambda r: order.get(r.get("id"), len(order)))
        df = pd.DataFrame(all_rows)
        atomic_write(run.run_dir / "rows.json", to_json(all_rows, indent=1) + "\n")
        summary = {s: sum(r.get("status") == s for r in all_rows) for s in Outcome}
        summary["entries"] = len(all_rows)
        summary["regressions"] = [f"{r['id']}: {r['regression']}" for r in all_rows
                                  if r.get("regression")]
        files = [run.run_dir / "rows.json"]
        if versions:  # in the open folder, its lock held; progress on stderr
            summary["versions"] = {m["framework"]: m for m in (
                version_matrix(spec, run.run_dir / "versions", versions_cache or DEFAULT_CACHE,
                               say=lambda line: print(line, file=sys.stderr, flush=True))
                for spec in versions)}
            files.append(atomic_write(run.run_dir / "versions.json",
                                      to_json(summary["versions"], indent=1) + "\n"))
    return RunResult(run.run_dir, df, summary, run.environment, resumed=len(kept),
                     files=files)


def records(result: RunResult) -> list[dict]:
    """The rows for JSON: an absent field is None (an atlas row holds no numbers, so a NaN
    is only the frame's mark for a field some rows lack)."""
    return [{k: None if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()}
            for r in result.rows.to_dict("records")]


def table_text(result: RunResult) -> str:
    """An atlas run for people: a line per entry (status, id, device, what was tried and, for
    an entry not tried here, why), then the counts."""
    rows = result.rows.to_dict("records")
    tried = [(f"{r['backend']} {r['case']} {r['dtype']}" if isinstance(r.get("case"), str)
              else f"{r['backend']} raw call: {r['probe']}" if isinstance(r.get("probe"), str)
              else "") for r in rows]
    head = "tried (backend case dtype, or raw call)"
    wid, twid = max(len(r["id"]) for r in rows), max(map(len, [head, *tried]))
    lines = [f"{'outcome':<10}  {'entry':<{wid}}  dev  {head:<{twid}}  why not tried"]
    for r, t in zip(rows, tried):
        why = r.get("reason") if r["status"] in UNTRIED else ""
        lines.append(f"{r['status']:<10}  {r['id']:<{wid}}  {r['device']:<3}  {t:<{twid}}  "
                     f"{why or ''}".rstrip())
    counts = ", ".join(f"{v} {k}" for k, v in result.summary.items() if k in set(Outcome) and v)
    lines += [f"regression: {line}" for line in result.summary.get("regressions", [])]
    for m in result.summary.get("versions", {}).values():
        lines += ["", f"{m['framework']} releases: " + "; ".join(
            f"{v} {t['release']}" for v, t in m["versions"].items())]
        ids = sorted({k for t in m["versions"].values() for k in t if k != "release"})
        for eid in ids:
            lines.append(f"  {eid}: " + ", ".join(
                f"{v} {t.get(eid, '-')}" for v, t in m["versions"].items() if t["release"] == "ran")
                + (f" (first bad {m['first_bad'][eid]})" if eid in m["first_bad"] else "")
                + (f" (first fixed {m['first_fixed'][eid]})" if eid in m["first_fixed"] else ""))
    return "\n".join(lines + [f"atlas: {result.summary['entries']} entries: {counts}; results "
                              f"in {result.run_dir}"])
