"""Write a problem found by ``ctcbench fuzz`` as a case file ``ctcbench compare --cases`` reads."""
from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np

from ctcbench.caselib.library import Tolerance

BRUTE_FORCE_PATHS = 200_000  # up to this many paths (C ** T_n) per sample, brute force is the oracle


def _num(x: float) -> str:
    """A TOML float that reads back bit for bit."""
    if math.isnan(x):
        return "nan"
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return repr(float(x))


def _str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def _value(x) -> str:
    """A TOML value: a string, a boolean, an integer, a float read back bit for bit, a list."""
    if isinstance(x, str):
        return _str(x)
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, (int, np.integer)):
        return str(int(x))
    if isinstance(x, (list, tuple, np.ndarray)):
        return "[" + ", ".join(_value(v) for v in x) + "]"
    return _num(float(x))


def case_toml(name: str, build: dict, dtype: str, tol: Tolerance, *, description: str,
              provenance: str, expect: dict | None = None) -> str:
    """One ``[[case]]`` holding ``build`` exactly (every key as it is: a ``table`` of logits,
    ``random`` with the seed they are drawn from, ``peaked`` with its paths); brute force is
    its oracle where that is cheap, else the float64 reference. ``expect``: more keys of its
    ``[case.expect]`` (``deterministic`` and ``calls`` for two different answers)."""
    C, table = build["C"], build["generator"] == "table"
    small = table and all(C ** len(s["logits"]) <= BRUTE_FORCE_PATHS for s in build["sample"])
    lines = ["[[case]]", f"name = {_str(name)}", f"description = {_str(description)}",
             f"provenance = {_str(provenance)}", f"dtypes = [{_str(dtype)}]", "",
             "[case.build]"]
    lines += [f"{k} = {_value(v)}" for k, v in build.items() if k != "sample"]
    for sample in build["sample"]:
        lines += ["", "[[case.build.sample]]"]
        for k, v in sample.items():
            if k != "logits":
                lines.append(f"{k} = {_value(v)}")
                continue
            rows = ",\n".join("  [" + ", ".join(_num(x) for x in row) + "]" for row in v)
            lines.append(f"logits = [\n{rows},\n]" if rows else "logits = []")
    lines += ["", "[case.expect]", f"oracle = {_str('brute_force' if small else 'reference')}"]
    lines += [f"{k} = {_value(v)}" for k, v in (expect or {}).items()]
    lines += ["",
              f"[case.tolerance.{dtype}]", f"loss_rtol = {_num(tol.loss_rtol)}",
              f"loss_atol = {_num(tol.loss_atol)}", f"grad_atol = {_num(tol.grad_atol)}", ""]
    return "\n".join(lines)


def case_name(text: str) -> str:
    """``text`` (a backend such as ``pkg.mod:name``, a stage) as a case and file name: lower
    case letters, digits and ``_``."""
    return re.sub(r"[^a-z0-9_]", "_", text.lower())


def write_case(folder: Path, name: str, build: dict, dtype: str, tol: Tolerance, **text) -> Path:
    """Write the case ``name`` (made a case name by :func:`case_name`) to ``folder``."""
    name = case_name(name)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(case_toml(name, build, dtype, tol, **text))
    return path
