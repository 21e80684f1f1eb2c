"""docs/layout.md's "Where things live" names every module of ctcbench/ and backends/, and
names no module that does not exist: read against the tree, so the map cannot drift."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def entries() -> dict[str, str]:
    """Each entry of the map's code block: its path (the first word of an unindented line)
    -> the text of the entry, continuation lines included."""
    block = (ROOT / "docs" / "layout.md").read_text().split("## Where things live", 1)[1]
    found, current = {}, None
    for line in block.split("```", 2)[1].splitlines():
        if line and not line.startswith(" "):
            current = line.split()[0]
            found[current] = line[len(current):]
        elif current:
            found[current] += " " + line
    return found


def modules_named(path: str, text: str, have: set[str]) -> set[str]:
    """Module names an entry gives: ``name.py`` words; in backends/, the bare adapter names."""
    if path.startswith("backends/"):
        return {w for w in re.findall(r"\b([a-z_0-9]+)\b", text) if w in have}
    return set(re.findall(r"\b([a-z_0-9]+)\.py\b", text))


def listed_elsewhere() -> tuple[set[str], set[str]]:
    """What another table names, so the map need not: adapter modules a built-in registry line
    names (backends/..., as paths), and drivers' packages, found by their kind.py."""
    from ctcbench.drivers import DRIVERS
    from ctcbench.runtime.decoders import BUILTIN_DECODERS
    from ctcbench.runtime.registry import BUILTIN_BACKENDS
    modules = {target.split(":")[0].removeprefix("ctcbench.").replace(".", "/") + ".py"
               for target in (*BUILTIN_BACKENDS.values(), *BUILTIN_DECODERS.values())}
    return modules, {f"ctcbench/{name}/" for name in DRIVERS}


def test_every_module_is_on_the_map_and_every_one_named_exists():
    missing, unknown = [], []
    adapters, drivers = listed_elsewhere()
    folders = [p for p in entries() if p.endswith("/") and p.startswith(("ctcbench/", "backends/"))]
    for folder in folders:
        have = {p.stem for p in (ROOT / folder).glob("*.py") if p.stem != "__init__"}
        have -= {m for m in have if f"{folder}{m}.py" in adapters}
        named = modules_named(folder, entries()[folder], have)
        missing += [f"{folder}{m}.py" for m in sorted(have - named)]
        unknown += [f"{folder}{n}.py" for n in sorted(named - have)]
    subpackages = {p.parent.relative_to(ROOT).as_posix() + "/"
                   for top in ("ctcbench", "backends")
                   for p in (ROOT / top).glob("*/__init__.py")} - {"ctcbench/cases/"} - drivers
    assert subpackages <= set(folders), sorted(subpackages - set(folders))
    block = " ".join(f"{k} {v}" for k, v in entries().items())
    missing += [f"ctcbench/{p.name}" for p in sorted((ROOT / "ctcbench").glob("*.py"))
                if p.name != "__init__.py" and p.name not in block]
    assert not missing and not unknown, {"not on the map": missing, "not in the tree": unknown}


def test_the_check_can_fail():
    assert modules_named("ctcbench/x/", "kind.py, run.py (the entry)", set()) == {"kind", "run"}
    assert modules_named("backends/", "numpy_ref, torch_native", {"numpy_ref"}) == {"numpy_ref"}
