"""Row statuses are one vocabulary (``ctcbench.runtime.status``): every status a driver's source
writes or tests is one of its words, and the groups are drawn from it."""
from __future__ import annotations

import ast
import json
from pathlib import Path

from ctcbench.runtime.status import CHECKED, FAILING, ORDER, TRANSIENT, Status

ROOT = Path(__file__).resolve().parents[2]
ROW_WRITERS = ("compare", "bench", "atlas", "runtime", "datasheet")  # the folders of ctcbench/


def status_literals(tree: ast.AST) -> list[str]:
    """String constants given as a row's status: ``{"status": "x"}`` and ``r["status"] == "x"``
    (or ``!=``, ``in (...)``)."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            found += [v.value for k, v in zip(node.keys, node.values)
                      if isinstance(k, ast.Constant) and k.value == "status"
                      and isinstance(v, ast.Constant) and isinstance(v.value, str)]
        elif isinstance(node, ast.Compare) and "status" in ast.unparse(node.left):
            for right in node.comparators:
                items = right.elts if isinstance(right, (ast.Tuple, ast.List, ast.Set)) else [right]
                found += [c.value for c in items
                          if isinstance(c, ast.Constant) and isinstance(c.value, str)]
    return found


def test_every_status_in_the_drivers_source_is_declared():
    declared = {s.value for s in Status}
    wrong = [(str(p.relative_to(ROOT)), word) for folder in ROW_WRITERS
             for p in sorted((ROOT / "ctcbench" / folder).glob("*.py"))
             for word in status_literals(ast.parse(p.read_text()))
             if word not in declared]
    assert not wrong, wrong


def test_the_check_can_fail():
    tree = ast.parse('row = {"status": "okay"}\nif r["status"] in ("ok", "passed"): pass')
    assert status_literals(tree) == ["okay", "ok", "passed"]


def test_the_groups_are_words_of_the_vocabulary_in_order():
    assert ORDER[:len(FAILING)] == FAILING  # failures sort first
    assert set(TRANSIENT) <= set(FAILING) and set(CHECKED) == {*FAILING, Status.KNOWN, Status.OK}
    assert json.dumps({"status": Status.OK}) == '{"status": "ok"}'  # rows stay plain JSON
