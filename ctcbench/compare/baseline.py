"""A baseline of a backend's own numbers: ``compare --save-baseline FILE``, then
``compare --baseline FILE --max-change TOL``.

Each checked row keeps a fingerprint of what the backend returned (``fingerprint``): every
variant's losses, exactly, and eight fixed random projections of its gradient (the flattened
``(T, N, C)`` gradient in blocks of ``BLOCK`` entries, each block weighted by the same fixed
standard-normal ``(8, BLOCK)`` matrix, so a change of d in any one entry moves some projection
by about d), with a digest of the problems, so a case whose definition changed is not
compared as if it had not. A later run fails where any number
moved by more than TOL, measured as ``|new - old| / max(|old|, 1)``, even within the
reference's tolerance: a kernel author sees a change of 1e-9.

The file is JSON, one entry per (backend, case, dtype) in sorted order, so it diffs.
"""
from __future__ import annotations

import hashlib
import importlib.metadata
import math
from pathlib import Path

import numpy as np

from ctcbench.caselib.fields import keys
from ctcbench.errors import expect, fail

from ctcbench.files import atomic_write, parse_text, read_text, to_json

FORMAT = 1
KIND = "ctcbench-baseline"
KEYS = ("format", "kind", "ctcbench", "backend_versions", "rows")  # what save_baseline writes
BLOCK = 4096
WEIGHTS = np.random.default_rng(20261202).standard_normal((8, BLOCK))  # fixed: part of FORMAT


def fingerprint(problems, results) -> dict:
    """What a baseline keeps of one row: each variant's losses ``(N,)``, eight projections
    of its gradient, and a digest of the problems the backend was given."""
    digest = hashlib.sha256()
    for p in problems:
        for a in (p.logits, p.targets, p.input_lengths, p.target_lengths, np.int64(p.blank)):
            digest.update(np.ascontiguousarray(a).tobytes())
    grads = []
    for r in results:
        g = np.asarray(r.grad_logits, np.float64).ravel()  # (T*N*C,)
        blocks = np.zeros(-(-g.size // BLOCK) * BLOCK)
        blocks[:g.size] = g
        with np.errstate(invalid="ignore", over="ignore"):
            grads.append((blocks.reshape(-1, BLOCK) @ WEIGHTS.T).sum(0).tolist())  # (8,)
    return {"loss": [np.asarray(r.loss, np.float64).tolist() for r in results],
            "grad": grads, "problems": digest.hexdigest()[:16]}


def _key(row) -> str:
    return f"{row['backend']} {row['case']} {row['dtype']}"


def save_baseline(rows, path, *, backend_versions: dict) -> int:
    """Write the fingerprints of ``rows`` (dicts) to ``path``; returns how many."""
    entries = {_key(r): r["fingerprint"] for r in rows if isinstance(r.get("fingerprint"), dict)}
    atomic_write(Path(path), to_json({"format": FORMAT, "kind": KIND, "ctcbench": importlib.metadata.version("ctcbench"),
                                      "backend_versions": backend_versions,
                                      "rows": dict(sorted(entries.items()))}, indent=1) + "\n")
    return len(entries)


def load_baseline(path, option: str = "--baseline") -> dict:
    """The baseline in ``path``; one error naming ``option`` for a file that is not one."""
    data = parse_text(read_text(Path(path), option), option, "JSON", "a baseline file (JSON)")
    if not isinstance(data, dict) or data.get("kind") != KIND:
        fail(option, "a baseline written by ctcbench compare --save-baseline", f"{path}")
    if data.get("format") != FORMAT:
        fail(option, f"a baseline of format {FORMAT}", f"format {data.get('format')!r} in {path}")
    keys(data, f"{option} {path}", KEYS)
    rows = data.get("rows")
    expect(isinstance(rows, dict), f"{option} {path}: rows",
           "a table of fingerprints keyed 'BACKEND CASE DTYPE'",
           "nothing" if rows is None else type(rows).__name__)
    for key, fp in rows.items():
        _check_fingerprint(fp, f"{option} {path}: rows[{key!r}]")
    return data


def _is_number(x) -> bool:
    """A number as to_json writes one: an int or float, or "inf", "-inf", "nan"."""
    return (isinstance(x, (int, float)) and not isinstance(x, bool)
            and (isinstance(x, float) or abs(x) < 2**1023)) or x in ("inf", "-inf", "nan")


def _check_fingerprint(fp, where: str) -> None:
    """A saved row as :func:`fingerprint` writes it, or one error naming the row and key."""
    expect(isinstance(fp, dict) and set(fp) == {"loss", "grad", "problems"}, where,
           "a table with the keys grad, loss, problems",
           sorted(fp) if isinstance(fp, dict) else repr(fp)[:80])
    for key in ("loss", "grad"):
        expect(isinstance(fp[key], list) and all(
            isinstance(v, list) and all(_is_number(x) for x in v) for v in fp[key]),
            f"{where}.{key}", "a list of lists of numbers (one per variant)", repr(fp[key])[:80])
    expect(isinstance(fp["problems"], str), f"{where}.problems", "a digest (a string)",
           repr(fp["problems"])[:80])


def _number(x) -> float:
    return float(x)  # to_json writes inf and nan as strings; float() reads them back


def _change(old, new) -> float:
    """``|new - old| / max(|old|, 1)``; 0 for equal infinities or two NaNs."""
    old, new = _number(old), _number(new)
    if old == new or (math.isnan(old) and math.isnan(new)):
        return 0.0
    if math.isnan(old) or math.isnan(new) or math.isinf(old) or math.isinf(new):
        return math.inf
    return abs(new - old) / max(abs(old), 1.0)


def moved(old: dict, new: dict) -> tuple[float, str]:
    """The largest change between two fingerprints of a row, and where it is."""
    worst, where = 0.0, ""
    for v, (a, b) in enumerate(zip(old["loss"], new["loss"])):
        if len(a) != len(b):
            return math.inf, f"variant {v}: {len(b)} losses, the baseline has {len(a)}"
        for n, (x, y) in enumerate(zip(a, b)):
            c = _change(x, y)
            if c > worst:
                worst, where = c, f"loss, variant {v}, sample {n}: {_number(x):.17g} -> {_number(y):.17g}"
    for v, (a, b) in enumerate(zip(old["grad"], new["grad"])):
        for k, (x, y) in enumerate(zip(a, b)):
            c = _change(x, y)
            if c > worst:
                worst, where = c, f"gradient, variant {v}, projection {k}: {_number(x):.17g} -> {_number(y):.17g}"
    return worst, where


def against_baseline(rows, baseline: dict, max_change: float) -> dict:
    """``{"moved": the rows that moved by more than max_change, one per line, "compared":
    what was compared, "matched": how many rows}``; the gate fails when a row moved, or when
    none of the baseline's rows is in this run (``failed``)."""
    saved = baseline["rows"]
    lines, compared, changed_case, new_rows = [], 0, [], 0
    for row in rows:
        fp = row.get("fingerprint")
        if not isinstance(fp, dict):
            continue
        old = saved.get(_key(row))
        if old is None:
            new_rows += 1
            continue
        if old.get("problems") != fp["problems"]:
            changed_case.append(_key(row))
            continue
        compared += 1
        worst, where = moved(old, fp)
        if worst > max_change:
            lines.append(f"{row['backend']} {row['case']} {row['dtype']}: moved {worst:.3g} > "
                         f"--max-change {max_change:g} ({where})")
    here = {_key(r) for r in rows if isinstance(r.get("fingerprint"), dict)}
    missing = len(set(saved) - here)
    said = [f"compared {compared} rows with the baseline (ctcbench {baseline.get('ctcbench')})"]
    if new_rows:
        said.append(f"{new_rows} not in it")
    if missing:
        said.append(f"{missing} of its rows not run")
    if changed_case:
        said.append(f"{len(changed_case)} whose case changed since, not compared "
                    f"({', '.join(changed_case[:3])}{' ...' * (len(changed_case) > 3)})")
    return {"moved": lines, "compared": "; ".join(said), "matched": compared,
            "failed": bool(lines) or (bool(saved) and not compared)}
