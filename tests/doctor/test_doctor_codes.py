"""Finding codes are declared once, as ctcbench.doctor.findings.Code: every check names its code
through it, an undeclared code is refused, and the output still spells codes as plain strings."""
from __future__ import annotations

import ast
import json
from pathlib import Path

import numpy as np
import pytest

from ctcbench.doctor import diagnose
from ctcbench.doctor.findings import CODES, Code, Finding, rank
from ctcbench.files import to_json

DOCTOR = Path(__file__).parents[2] / "ctcbench" / "doctor"
SOURCES = sorted(p for p in DOCTOR.glob("*.py") if p.name != "findings.py")


def _code_argument(call: ast.Call) -> ast.expr | None:
    """The node a ``Finding(...)`` call passes as its code (first argument or ``code=``)."""
    if call.args:
        return call.args[0]
    return next((k.value for k in call.keywords if k.arg == "code"), None)


def _is_finding_call(node: ast.AST) -> bool:
    func = getattr(node, "func", None)
    return isinstance(node, ast.Call) and (getattr(func, "id", None) == "Finding"
                                           or getattr(func, "attr", None) == "Finding")


def _declared_member(node: ast.expr | None) -> str | None:
    """``NAME`` when ``node`` is ``Code.NAME`` for a declared member, else None."""
    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
            and node.value.id == "Code" and node.attr in Code.__members__):
        return node.attr
    return None


def _spells_code(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value in set(CODES)


def undeclared_codes(source: str, name: str = "<source>") -> list[str]:
    """Places in ``source`` that name a finding code without ``Code``: a ``Finding(...)`` whose
    code is not ``Code.MEMBER``, and string literals spelling a code that are compared, listed
    in a tuple, list or set (a group of codes), or added to a finding's ``explains``."""
    problems = []
    for node in ast.walk(ast.parse(source)):
        where = f"{name}:{getattr(node, 'lineno', '?')}"
        if _is_finding_call(node) and _declared_member(_code_argument(node)) is None:
            problems.append(f"{where}: Finding({ast.unparse(_code_argument(node) or node)}, ...)")
        elif isinstance(node, ast.Compare):
            problems += [f"{where}: compares {c.value!r}" for c in [node.left, *node.comparators]
                         if _spells_code(c)]
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            problems += [f"{where}: lists {c.value!r}" for c in node.elts if _spells_code(c)]
        elif (isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "append"
              and getattr(node.func.value, "attr", None) == "explains"):
            problems += [f"{where}: explains {c.value!r}" for c in node.args if _spells_code(c)]
    return problems


def test_the_source_check_flags_literal_codes():
    """The check below can fail: a literal code, an unknown member, a compared literal."""
    assert undeclared_codes('Finding("layout", "error", "m", {}, "f")')
    assert undeclared_codes('Finding(code="layout", severity="error")')
    assert undeclared_codes('Finding(Code.NO_SUCH_CODE, "error", "m", {}, "f")')
    assert undeclared_codes('found = [f for f in fs if f.code in ("blank-collapse",)]')
    assert undeclared_codes('finding.explains.append("blank-collapse")')
    assert undeclared_codes('FIT = {"length-mismatch", "infeasible-target"}')
    assert not undeclared_codes('Finding(Code.LAYOUT, "error", "m", {}, "f")')
    assert not undeclared_codes('summary = {"layout": layout}; ok = reduction != "mean"')


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: p.name)
def test_every_doctor_module_names_codes_through_the_declaration(path):
    assert undeclared_codes(path.read_text(), path.name) == []


def test_every_declared_code_is_made_by_some_check():
    """No declaration without a check behind it: each member is the code of some Finding."""
    made = {_declared_member(_code_argument(node)) for path in SOURCES
            for node in ast.walk(ast.parse(path.read_text())) if _is_finding_call(node)}
    assert set(Code.__members__) - made == set()


def test_an_undeclared_code_is_refused_where_the_finding_is_made():
    with pytest.raises(ValueError, match="no-such-code"):
        Finding("no-such-code", "error", "message", {}, "fix")
    assert Finding("layout", "error", "message", {}, "fix").code is Code.LAYOUT


def test_ties_rank_in_declaration_order():
    """Same severity, explaining as many others: the code declared first ranks first."""
    last, first = Code.REDUCTION, Code.LAYOUT
    found = rank([Finding(c, "error", "m", {}, "f") for c in (last, first)])
    assert [f.code for f in found] == [first, last]


def test_codes_print_and_serialise_as_their_plain_names():
    """A batch with an infeasible target and wrongly normalised scores: the table, the JSON and
    Report.codes spell every emitted code (and what it explains) as the plain string."""
    rng = np.random.default_rng(0)
    raw = rng.normal(size=(3, 2, 6)) + 5.0  # raw scores, not log-probabilities
    report = diagnose(raw, targets=np.array([[1, 1, 1], [2, 3, 0]]),
                      input_lengths=np.array([3, 3]), target_lengths=np.array([3, 2]))
    assert len(report.findings) >= 2, report
    data = json.loads(to_json(report.to_dict()))
    table = report.format_table()
    for finding, row in zip(report.findings, data["findings"]):
        assert isinstance(finding.code, Code)
        assert row["code"] == finding.code.value
        assert f"{finding.severity.upper():<8}{finding.code.value}: " in table
    assert all(type(c) is str for c in report.codes)
    assert report.codes == [row["code"] for row in data["findings"]]
