"""The pytest plugin: the case library as test items of an implementer's own suite.

    pytest --ctcbench-function mypkg.ctc:ctc_loss

adds one test per (case, dtype) of the library, ``mypkg.ctc:ctc_loss::tf_basic[float64]``,
so ``-k``, ``-x`` and ``--lf`` work on case names; the function runs in a worker process, as
``ctcbench compare --function`` runs it (all selected cases in one compare, on the first
item). A failure says what is wrong, the common fault it shows where compare names one (also
listed once at the end), and the command that shows it again; the failures your
``--ctcbench-known-issues FILE`` lists are xfail with their reason, as are those that are the
known issues of a framework ``--ctcbench-accept-known NAME`` names; a dtype the function does
not take is a skip. The ``ctc_case`` fixture parametrises your own tests over the library:
each value has ``name``, ``dtype``, ``problem`` (a ``ctcbench.CTCProblem``), ``loss`` (the
known answer, ``(N,)``) and ``grad`` (``(T, N, C)``, or None where the oracle gives none).
Installed as a ``pytest11`` entry point, it does nothing unless an option asks.
"""
from __future__ import annotations

import functools
import tempfile
from dataclasses import dataclass

import numpy as np
import pytest

from ctcbench.runtime.status import FAILING, Status
from ctcbench.testing import command, describe

OPTIONS = {  # --ctcbench-NAME: (what it takes, help)
    "function": ("PKG.MOD:NAME", "your CTC function: the case library as tests (repeatable)"),
    "convention": ("NAME", "torch, optax, keras or numpy, for a function whose parameter "
                           "names do not say"),
    "known-issues": ("FILE.toml", "your known_issues.toml: the failures it lists are xfail"),
    "accept-known": ("FRAMEWORK", "a framework your function wraps (torch, optax, ...): the "
                                  "failures that are its known issues are xfail (repeatable)"),
    "case": ("GLOB", "only the cases matching (repeatable) [default: all]"),
    "dtype": ("DTYPE", "only these dtypes (repeatable) [default: each case's own]"),
}
REPEATABLE = ("function", "case", "dtype", "accept-known")


def pytest_addoption(parser):
    group = parser.getgroup("ctcbench", "CTC conformance (ctcbench)")
    for name, (metavar, help) in OPTIONS.items():
        group.addoption(f"--ctcbench-{name}", metavar=metavar, help=help,
                        action="append" if name in REPEATABLE else "store",
                        default=[] if name in REPEATABLE else None)


def _option(config, name: str):
    return config.getoption(f"--ctcbench-{name}")


def pytest_configure(config):
    """Each ``--ctcbench-function`` imported and probed in its worker before any test: a
    mistake in the option is one usage error."""
    from ctcbench.compare.inherited import FRAMEWORKS
    from ctcbench.compare.run import known_of
    from ctcbench.errors import InputError, one_of
    from ctcbench.runtime.functions import add_functions
    targets, path = _option(config, "function"), _option(config, "known-issues")
    if targets:
        try:
            one_of("accept-known", _option(config, "accept-known"), FRAMEWORKS)
            add_functions(targets, convention=_option(config, "convention"), say=lambda _: None,
                          known_issues=known_of(path, targets) if path else None)
        except (InputError, KeyError, OSError) as exc:
            name = getattr(exc, "name", "")
            message = exc.named(f"--ctcbench-{name.lstrip('-')}") if name else str(exc)
            raise pytest.UsageError(message) from None


@functools.lru_cache(maxsize=1)
def _library() -> dict:
    """The built-in case library, by name, read once per session."""
    from ctcbench.caselib.library import load_cases
    return {c.name: c for c in load_cases(None)}


def _pairs(config) -> list[tuple[str, str]]:
    """(case, dtype) of every selected case, in the library's order."""
    from ctcbench.caselib.library import select_cases
    dtypes = _option(config, "dtype") or None
    cases = select_cases(list(_library().values()), _option(config, "case") or None)
    return [(c.name, d) for c in cases for d in c.dtypes if dtypes is None or d in dtypes]


class FunctionTests(pytest.Collector):
    """The tests of one ``--ctcbench-function``."""

    def collect(self):
        for case, dtype in _pairs(self.config):
            yield CaseItem.from_parent(self, name=f"{case}[{dtype}]", case=case, dtype=dtype)


class CaseItem(pytest.Item):
    """One (case, dtype) of the library, checked on the function its parent names."""

    def __init__(self, *, case: str, dtype: str, **kwargs):
        super().__init__(**kwargs)
        self.case, self.dtype = case, dtype

    def runtest(self):
        row = _rows(self.session, self.parent.name).get((self.case, self.dtype))
        convention = _option(self.config, "convention")
        if row is None:
            pytest.skip(f"not run: {command(self.parent.name, self.case, self.dtype)}")
        if row["status"] == Status.KNOWN:
            pytest.xfail(row.get("reason") or "known issue")
        if row["status"] in (Status.UNSUPPORTED, Status.SKIPPED):
            pytest.skip(row.get("reason") or row["status"])
        if row["status"] in FAILING:
            raise CaseFailure(describe(row, convention) + "".join(
                f"\n    cause: {line}" for line in _causes(self.config, self.parent.name, row)))

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, CaseFailure):
            return str(excinfo.value)
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.parent.name, None, f"{self.case} [{self.dtype}]"


class CaseFailure(AssertionError):
    """A case the function gets wrong; its message is the whole report."""


def _rows(session, target: str) -> dict:
    """``{(case, dtype): row}`` of one compare of ``target`` on the selected items, run once."""
    cache = session.stash.setdefault(_ROWS, {})
    if target not in cache:
        from ctcbench.compare.run import compare
        items = [i for i in session.items if isinstance(i, CaseItem) and i.parent.name == target]
        config = session.config
        result = compare(None, sorted({i.case for i in items}),
                         sorted({i.dtype for i in items}), functions=[target],
                         convention=_option(config, "convention"),
                         known_issues=_option(config, "known-issues"), progress=False, plot=False,
                         accept_known=tuple(_option(config, "accept-known")),
                         out=tempfile.mkdtemp(prefix="ctcbench-pytest-"))
        cache[target] = {(r["case"], r["dtype"]): r for r in result.rows.to_dict("records")
                         if r["backend"] == target}
        session.config.stash.setdefault(_CAUSES, {})[target] = result.summary.get("causes", [])
    return cache[target]


def _causes(config, target: str, row: dict | None = None) -> list[str]:
    """The cause lines compare named for ``target`` (``ctcbench.compare.causes``); with a
    ``row``, those its failing samples show."""
    lines = config.stash.get(_CAUSES, {}).get(target, [])
    if row is None:
        return lines
    names = (row.get("cause") or "").split("; ")
    return [line for line in lines if any(n and line.startswith(f"{n}: ") for n in names)]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """The causes named for each function, once, after the failures."""
    found = [(target, line) for target in dict.fromkeys(_option(config, "function"))
             for line in _causes(config, target)]
    if found:
        terminalreporter.section("ctcbench: causes")
        for target, line in found:
            terminalreporter.write_line(f"{target}: {line}")


_ROWS = pytest.StashKey[dict]()
_CAUSES = pytest.StashKey[dict]()  # target -> its cause lines


@pytest.hookimpl(tryfirst=True)  # before -k and -m deselect
def pytest_collection_modifyitems(session, config, items):
    for target in dict.fromkeys(_option(config, "function")):
        collector = FunctionTests.from_parent(session, name=target, nodeid=target)
        report = config.hook.pytest_make_collect_report(collector=collector)
        config.hook.pytest_collectreport(report=report)  # counted in "collected N items"
        items.extend(report.result)


@dataclass(frozen=True)
class CTCCase:
    """One (case, dtype) of the library with its known answer (its first variant)."""

    name: str
    dtype: str
    problem: object  # ctcbench.CTCProblem
    loss: np.ndarray  # (N,) the known answer
    grad: np.ndarray | None  # (T, N, C) or None

    def __repr__(self) -> str:
        return f"<CTCCase {self.name} [{self.dtype}]>"


def pytest_generate_tests(metafunc):
    if "ctc_case" in metafunc.fixturenames:
        pairs = _pairs(metafunc.config)
        metafunc.parametrize("ctc_case", pairs, indirect=True,
                             ids=[f"{c}[{d}]" for c, d in pairs])


@pytest.fixture
def ctc_case(request) -> CTCCase:
    """A case of the library (see the module's docstring); built when a test uses it."""
    from ctcbench.compare.checks import prepare
    name, dtype = request.param
    prep = prepare(_library()[name], dtype)
    if not prep.problems:
        pytest.skip(f"{name} is a case the API must refuse (no answer to compare with)")
    answer = prep.answers[0]
    return CTCCase(name, dtype, prep.problems[0], answer.loss, answer.grad)
