"""Write a problem found by ``ctcbench fuzz`` as a case file ``ctcbench compare --cases`` reads."""
from __future__ import annotations

import math
from pathlib import Path

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


def case_toml(name: str, build: dict, dtype: str, tol: Tolerance, *, description: str,
              provenance: str) -> str:
    """One ``[[case]]`` holding ``build`` exactly (a ``table`` of logits, or ``random`` with the
    seed they are drawn from); brute force is its oracle where that is cheap, else the float64
    reference."""
    C, table = build["C"], build["generator"] == "table"
    small = table and all(C ** len(s["logits"]) <= BRUTE_FORCE_PATHS for s in build["sample"])
    lines = ["[[case]]", f"name = {_str(name)}", f"description = {_str(description)}",
             f"provenance = {_str(provenance)}", f"dtypes = [{_str(dtype)}]", "",
             "[case.build]", f"generator = {_str(build['generator'])}", f"C = {C}",
             f"blank = {build['blank']}", f"T = {build['T']}", f"pad = {_num(build['pad'])}"]
    if not table:  # generator "random": the builder draws the logits from the seed
        lines += [f"seed = {build['seed']}", f"scale = {_num(build['scale'])}"]
    for sample in build["sample"]:
        lines += ["", "[[case.build.sample]]", f"target = {list(map(int, sample['target']))}"]
        if not table:
            lines.append(f"T = {sample['T']}")
            continue
        rows = ",\n".join("  [" + ", ".join(_num(v) for v in row) + "]" for row in sample["logits"])
        lines.append(f"logits = [\n{rows},\n]" if rows else "logits = []")
    lines += ["", "[case.expect]", f"oracle = {_str('brute_force' if small else 'reference')}", "",
              f"[case.tolerance.{dtype}]", f"loss_rtol = {_num(tol.loss_rtol)}",
              f"loss_atol = {_num(tol.loss_atol)}", f"grad_atol = {_num(tol.grad_atol)}", ""]
    return "\n".join(lines)


def write_case(folder: Path, name: str, build: dict, dtype: str, tol: Tolerance, **text) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(case_toml(name, build, dtype, tol, **text))
    return path
