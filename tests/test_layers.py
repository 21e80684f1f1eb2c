"""The import graph of ctcbench, read from the source: each part imports only parts of its own
layer or of layers to its left (docs/layout.md), and no two parts import each other."""
from __future__ import annotations

import ast
import itertools
from pathlib import Path

from ctcbench.drivers import DRIVERS as RUN_DRIVERS  # the drivers' layer, declared once

ROOT = Path(__file__).resolve().parents[1]

# docs/layout.md, "Layers": left to right. A part is a module or subpackage of ctcbench.
LAYERS = (
    ("errors", "files", "environment", "progress", "formatting", "plotting", "cluster",
     "cli_types", "settings"),
    ("core",),
    ("runtime", "backends"),
    ("caselib", "cases", "torch"),
    ("runs",),
    ("doctor", "keras", "lightning", "transformers"),  # the monitor as Keras and Lightning
    # callbacks and a Transformers TrainerCallback, with the doctor on a Transformers batch
    RUN_DRIVERS,
    ("report",),
    ("drivers",),
    ("cli", "command", "cli_docs", "cli_options", "testing", "pytest_plugin", "__main__", ""),
    # "": the package itself, the public API; "command": each driver's command.py
)
LAYER = {part: i for i, parts in enumerate(LAYERS) for part in parts}
DRIVERS = ("doctor", *RUN_DRIVERS)  # they and report know nothing of each other:
# ctcbench.drivers hands each kind's page context to the renderer


def part(module: str) -> str:
    """``ctcbench.compare.run`` -> ``compare``; ``ctcbench`` -> ``""``; a driver's (or the
    doctor's) ``ctcbench.compare.command`` -> ``command``, of the command line's layer."""
    names = module.split(".")
    if len(names) == 3 and names[1] in ("doctor", *RUN_DRIVERS) and names[2] == "command":
        return "command"
    return names[1] if len(names) > 1 else ""


def modules() -> dict[str, Path]:
    found = {}
    for path in [*ROOT.glob("ctcbench/**/*.py"), *ROOT.glob("backends/*.py")]:
        names = list(path.relative_to(ROOT).with_suffix("").parts)
        if names[0] == "backends":
            names = ["ctcbench", *names]
        if names[-1] == "__init__":
            names = names[:-1]
        found[".".join(names)] = path
    return found


MODULES = modules()


def imports(path: Path) -> set[str]:
    """Every ctcbench module ``path`` imports, at the top or inside a function."""
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module == "ctcbench":  # submodules too
            names = [f"ctcbench.{a.name}" if f"ctcbench.{a.name}" in MODULES else "ctcbench"
                     for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [node.module]
        elif isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        else:
            continue
        out |= {n for n in names if n == "ctcbench" or n.startswith("ctcbench.")}
    return out


def graph() -> dict[str, set[str]]:
    edges: dict[str, set[str]] = {}
    for module, path in MODULES.items():
        edges.setdefault(part(module), set()).update(
            part(m) for m in imports(path) if part(m) != part(module))
    return edges


def test_every_part_has_a_layer():
    assert set(graph()) <= set(LAYER), set(graph()) - set(LAYER)


def test_no_part_imports_a_later_layer():
    wrong = [f"{a} (layer {LAYER[a]}) imports {b} (layer {LAYER[b]})"
             for a, targets in graph().items() for b in targets if LAYER[b] > LAYER[a]]
    assert not wrong, "\n".join(wrong)


def test_no_two_parts_import_each_other():
    edges = graph()
    both = [(a, b) for a, b in itertools.combinations(sorted(edges), 2)
            if b in edges[a] and a in edges.get(b, ())]
    assert not both


def test_no_two_modules_import_each_other():
    """Within a part too: a module imported by another imports nothing of it (not even inside
    a function, the usual way such a cycle hides)."""
    edges = {module: {m for m in imports(path) if m in MODULES and m != module}
             for module, path in MODULES.items()}
    both = sorted((a, b) for a in edges for b in edges[a] if a < b and a in edges.get(b, ()))
    assert not both, both


def test_drivers_and_report_do_not_import_each_other():
    edges = graph()
    wrong = [(a, b) for a in DRIVERS for b in ("report",) if b in edges.get(a, ())]
    wrong += [("report", d) for d in DRIVERS if d in edges.get("report", ())]
    assert not wrong


# the one driver built on another: atlas runs its entries' cases as compare runs them
BUILT_ON = {("atlas", "compare")}


def test_no_driver_imports_another_driver():
    """What two drivers share lives in a lower layer (runtime's sizes and timing loop,
    caselib's judge and case files), so a driver changes without touching its siblings."""
    edges, drivers = graph(), RUN_DRIVERS  # the doctor is a layer below them
    wrong = sorted((a, b) for a in drivers for b in drivers
                   if a != b and b in edges.get(a, ()) and (a, b) not in BUILT_ON)
    assert not wrong, wrong


def test_the_check_can_fail():
    """The graph reader sees an import made inside a function (as the drivers' lazy ones are)."""
    assert "ctcbench.report" in imports(ROOT / "ctcbench" / "drivers.py")
