"""A datasheet run folder's rows read back as one datasheet per backend, and its exports:
``datasheet.json`` (every sheet) and ``datasheet.md`` (the side-by-side table)."""
from __future__ import annotations

from pathlib import Path

from ctcbench.datasheet.axes import AXES
from ctcbench.datasheet.config import command_line
from ctcbench.datasheet.determinism import Repeats
from ctcbench.datasheet.precision import CLIMBS
from ctcbench.environment import cpu_text
from ctcbench.runtime.malformed import verdict
from ctcbench.files import atomic_write, to_json
from ctcbench.formatting import sci, sig
from ctcbench.runtime.status import Status

PRECISION_LABELS = {"loss": "worst loss error", "loss_rel": "worst loss error / max(1, loss)",
                    "grad": "worst gradient error"}  # one per climb of the precision search


def limit_text(v: dict) -> str:
    """One limit for people: "1024 (wrong at 1025)", ">= 524288", "fails at 8 (crashes)"."""
    if v["failing"] is None:
        return f">= {v['correct']}" if v["correct"] is not None else "not searched"
    if v["correct"] is None:
        return f"fails at {v['failing']} ({v['past_status']})"
    step = "" if v["exact"] else f" ({v['correct']}..{v['failing']}, bisection unfinished)"
    if v.get("sharp") is False:  # not at every draw: an error growing into the bound
        return f"~{v['correct']} (the error reaches the {v.get('dtype')} bound; no cliff)"
    return f"{v['correct']} ({v['past_status']} at {v['failing']}){step}"


def sheets(rows: list[dict]) -> dict[str, dict]:
    """backend -> its datasheet, from a run's rows (in the order the backends were run)."""
    out: dict[str, dict] = {}
    for r in rows:
        name, dtype, stage = r.get("backend"), r.get("dtype"), r.get("stage")
        s = out.setdefault(name, {"backend": name, "status": Status.OK, "limits": {},
                                  "precision": {}, "robustness": [], "determinism": {},
                                  "speed": {}})
        if stage == "info":
            s.update({k: v for k, v in r.items() if k not in ("stage", "item", "dtype")})
        elif stage == "limit":
            s["limits"].setdefault(dtype, {})[r["axis"]] = {**r, "text": limit_text(r)}
        elif stage == "precision":
            s["precision"][dtype] = r
        elif stage == "robustness":
            word, safe = verdict(r)
            s["robustness"].append({**r, "verdict": word, "safe": safe})
        elif stage == "determinism":
            s["determinism"][dtype] = {**r, "text": _determinism_text(r)}
        elif stage == "speed":
            s["speed"].setdefault(dtype, []).append(r)
    for s in out.values():
        for dtype, by_axis in s["limits"].items():  # in the order of AXES
            s["limits"][dtype] = {a: by_axis[a] for a in AXES if a in by_axis}
        counts: dict[str, int] = {}
        for r in s["robustness"]:
            counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
        s["robustness_counts"] = counts
    return out


def _precision_text(p: dict | None, key: str) -> str:
    if not p or key not in p:
        return ""
    found = p[key]
    g = found["genes"]
    err = found[CLIMBS[key]]
    return (f"{sci(err)} (T={g['T']} C={g['C']} L={g['L']} {g['frames']}"
            f"{' scale ' + sig(g['scale']) if g['frames'] == 'random' else ''})")


def _tried_text(p: dict | None) -> str:
    if not p:
        return ""
    return (f"{p['tried']} tried" + (f", {p['failed']} failed" if p.get("failed") else "")
            + (f", {p['too_large']} over --max-memory" if p.get("too_large") else ""))


def table(sheet: dict[str, dict]) -> list[list[str]]:
    """The side-by-side table: a header row of backends, then one row per property."""
    names = list(sheet)
    rows = [["", *names]]

    def add(label, cell):
        rows.append([label, *[cell(sheet[n]) for n in names]])

    add("device", lambda s: s.get("device") or s.get("status", ""))
    add("dtypes", lambda s: ", ".join(s.get("dtypes") or []))
    limit_dtypes = sorted({d for s in sheet.values() for d in s["limits"]})
    for dtype in limit_dtypes:
        for axis in AXES:
            if any(axis in s["limits"].get(dtype, {}) for s in sheet.values()):
                add(f"correct up to {axis} ({dtype})",
                    lambda s, a=axis, d=dtype: s["limits"].get(d, {}).get(a, {}).get("text", ""))
    for dtype in sorted({d for s in sheet.values() for d in s["precision"]}):
        for key, label in PRECISION_LABELS.items():
            add(f"{label} ({dtype})",
                lambda s, d=dtype, k=key: _precision_text(s["precision"].get(d), k))
        add(f"precision candidates ({dtype})",
            lambda s, d=dtype: _tried_text(s["precision"].get(d)))
    if any(s["robustness"] for s in sheet.values()):
        add("malformed input", lambda s: ", ".join(f"{v} {k}" for k, v in
                                                   sorted(s["robustness_counts"].items())))
    for dtype in sorted({d for s in sheet.values() for d in s["determinism"]}):
        add(f"repeat calls ({dtype})", lambda s, d=dtype: _determinism_text(s["determinism"].get(d)))
    for dtype in sorted({d for s in sheet.values() for d in s["speed"]}):
        sizes = [r["item"] for r in next(s["speed"][dtype] for s in sheet.values()
                                         if dtype in s["speed"])]
        for size in sizes:
            add(f"ns/cell, x torch ({dtype}, {size})",
                lambda s, d=dtype, z=size: _speed_text(s["speed"].get(d, []), z))
            add(f"peak memory MB ({dtype}, {size})",
                lambda s, d=dtype, z=size: _memory_text(s["speed"].get(d, []), z))
    return rows


def _determinism_text(r: dict | None) -> str:
    if not r:
        return ""
    if r["status"] == Repeats.IDENTICAL:
        return f"identical ({r['calls']} calls)"
    if r["status"] == Repeats.DIFFER:
        return f"differ: loss {sci(r['loss_diff'])}, grad {sci(r['grad_diff'])}"
    return r["status"]


def _row_for(rows: list[dict], size: str) -> dict | None:
    return next((r for r in rows if r["item"] == size), None)


def _speed_text(rows: list[dict], size: str) -> str:
    r = _row_for(rows, size)
    if r is None:
        return ""
    if r["status"] != Status.OK:
        return r["status"]
    ratio = r.get("ratio_to_torch")
    return sig(r["ns_per_cell"]) + (f", {sig(ratio)}x" if ratio is not None else "")


def _memory_text(rows: list[dict], size: str) -> str:
    r = _row_for(rows, size)
    return "" if r is None or r.get("peak_rss_mb") is None else sig(r["peak_rss_mb"])


def markdown(sheet: dict[str, dict], meta: dict) -> str:
    """``datasheet.md``: the table, dated, with where it ran and how it was made."""
    env = (meta or {}).get("environment") or {}
    config = (meta or {}).get("config") or {}
    head = table(sheet)
    backends = config.get("backends") or list(sheet)
    command = "ctcbench datasheet " + ("--all" if config.get("all") else "--backend " +
                                       ",".join(backends)) + " " + command_line(config)
    lines = ["# CTC implementations side by side", "",
             f"Measured {env.get('utc_time', '?')} on {cpu_text(env)}, "
             f"ctcbench at {env.get('git_commit') or '?'}, "
             f"with `{command}`; what each row means: [datasheet.md](datasheet.md).", "",
             "| " + " | ".join(head[0]) + " |", "|" + "---|" * len(head[0])]
    lines += ["| " + " | ".join(c.replace("|", "/") for c in row) + " |" for row in head[1:]]
    return "\n".join(lines) + "\n"


def write_exports(run_dir: Path, rows: list[dict], meta: dict) -> list[Path]:
    """``datasheet.json`` and ``datasheet.md`` in ``run_dir``; returns their paths."""
    sheet = sheets(rows)
    run_dir = Path(run_dir)
    atomic_write(run_dir / "datasheet.json", to_json({"environment": (meta or {}).get(
        "environment"), "config": (meta or {}).get("config"), "backends": sheet}, indent=1) + "\n")
    atomic_write(run_dir / "datasheet.md", markdown(sheet, meta))
    return [run_dir / "datasheet.json", run_dir / "datasheet.md"]


def text(sheet: dict[str, dict]) -> str:
    """:func:`table` for a terminal: columns padded to their widest cell."""
    rows = table(sheet)
    wide = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(c.ljust(w) for c, w in zip(r, wide)).rstrip() for r in rows)
