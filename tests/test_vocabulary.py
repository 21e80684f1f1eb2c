"""Each vocabulary is declared once, in its home module, and imported everywhere else: read from
the source, so a second ``DEVICES = ...`` (or the same words spelt out under another name)
fails here, wherever it is written."""
from __future__ import annotations

import ast
from pathlib import Path

from ctcbench.core.layouts import LAYOUTS
from ctcbench.runtime.devices import DEVICES
from ctcbench.runtime.function_backend import CONVENTIONS

ROOT = Path(__file__).resolve().parents[1]

# name -> (its home, relative to the repository root; the words it holds)
HOMES = {
    "DEVICES": ("ctcbench/runtime/devices.py", DEVICES),
    "LAYOUTS": ("ctcbench/core/layouts.py", LAYOUTS),
    "CONVENTIONS": ("ctcbench/runtime/function_backend.py", tuple(CONVENTIONS)),
}


def sources() -> dict[str, str]:
    return {p.relative_to(ROOT).as_posix(): p.read_text(encoding="utf-8")
            for top in ("ctcbench", "backends") for p in sorted((ROOT / top).rglob("*.py"))}


def declarations(path: str, text: str) -> list[str]:
    """``path:line NAME`` for each assignment to a vocabulary's name outside its home, and for
    each literal tuple, list or set of strings that spells out one vocabulary's words."""
    found = []
    for node in ast.walk(ast.parse(text)):
        targets = (node.targets if isinstance(node, ast.Assign) else
                   [node.target] if isinstance(node, (ast.AnnAssign, ast.AugAssign)) else [])
        found += [f"{path}:{node.lineno} {t.id}" for t in targets
                  if isinstance(t, ast.Name) and t.id in HOMES and HOMES[t.id][0] != path]
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)) and len(node.elts) > 1 and all(
                isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts):
            words = {e.value for e in node.elts}
            found += [f"{path}:{node.lineno} {name} spelt out" for name, (home, vocab)
                      in HOMES.items() if words == set(vocab) and home != path]
    return found


def test_each_vocabulary_is_declared_in_its_home_only():
    """DEVICES, LAYOUTS and CONVENTIONS: assigned in their home module and nowhere else in
    ctcbench/ or backends/, and their words not listed again under another name (import the
    name instead; a file format with words of its own maps them, see caselib/known.py)."""
    found = [d for path, text in sources().items() for d in declarations(path, text)]
    assert not found, "\n".join(found)


def test_each_home_declares_its_vocabulary():
    """The homes hold the names (a test whose homes were renamed away would pass on nothing)."""
    for name, (home, vocab) in HOMES.items():
        tree = ast.parse((ROOT / home).read_text(encoding="utf-8"))
        assigned = {t.id for node in tree.body if isinstance(node, (ast.Assign, ast.AnnAssign))
                    for t in (node.targets if isinstance(node, ast.Assign) else [node.target])
                    if isinstance(t, ast.Name)}
        assert name in assigned and len(vocab) > 1, (name, home)


def test_the_check_can_fail():
    """A copy under the same name, an annotated one, and the words under another name (in any
    order) are each found; the home and a mere subset are not."""
    text = ('DEVICES = ("cpu", "gpu")\n'
            'LAYOUTS: tuple = ("TNC", "NTC")\n'
            'def f():\n    return x in ("cuda", "cpu")\n'
            'READ_OFF = ("torch", "optax", "keras")\n')
    assert declarations("ctcbench/x.py", text) == [
        "ctcbench/x.py:1 DEVICES", "ctcbench/x.py:2 LAYOUTS", "ctcbench/x.py:2 LAYOUTS spelt out",
        "ctcbench/x.py:4 DEVICES spelt out"]
    assert declarations("ctcbench/core/layouts.py", 'LAYOUTS = ("TNC", "NTC")\n') == []
