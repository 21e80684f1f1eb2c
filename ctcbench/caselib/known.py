"""Known issues: what a built-in backend is known to get wrong on cases of the library.

The table is one data file beside the cases, ``cases/known_issues.toml`` (installed as
``ctcbench.cases``), one ``[[issue]]`` per upstream bug or limit::

    [[issue]]
    backend = "warpctc"                        # a built-in backend's name
    cases = ["empty_target", "torch_empty_*"]  # case-name globs
    dtypes = ["*"]                             # dtype globs
    reason = "SIGFPE when every target in the batch is empty"
    seen_with = "paddlepaddle 3.3.1"           # the upstream release it was seen with
    url = "https://..."                        # optional: the issue or source that shows it

``compare`` records a failing row that an issue matches as ``known``. A malformed file is one
``ValueError`` naming the file and the field.
"""
from __future__ import annotations

import fnmatch
import functools
import importlib.resources
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ctcbench.core.problem import FLOAT_DTYPES
from ctcbench.errors import expect, fail
from ctcbench.files import read_text

FILE_NAME = "known_issues.toml"  # in a case folder, this name holds the table, not cases
FORMATS = (1,)
_REQUIRED = ("backend", "cases", "dtypes", "reason", "seen_with")
_OPTIONAL = ("url",)


@dataclass(frozen=True)
class KnownIssue:
    """One upstream bug or limit of ``backend`` on the cases and dtypes its globs match."""

    backend: str
    cases: tuple[str, ...]
    dtypes: tuple[str, ...]
    reason: str
    seen_with: str
    url: str | None = None

    def matches(self, backend: str, case: str, dtype: str) -> bool:
        return (backend == self.backend and any(fnmatch.fnmatchcase(case, g) for g in self.cases)
                and any(fnmatch.fnmatchcase(dtype, g) for g in self.dtypes))


def _text(value, where: str) -> str:
    expect(isinstance(value, str) and value.strip() == value and bool(value), where,
           "a non-empty string without surrounding spaces", repr(value))
    return value


def _globs(value, where: str, what: str) -> tuple[str, ...]:
    expect(isinstance(value, list) and bool(value) and all(isinstance(g, str) and g
                                                           for g in value),
           where, f"a non-empty list of {what} globs", repr(value))
    return tuple(value)


def _issue(raw, where: str) -> KnownIssue:
    expect(isinstance(raw, dict), where, "a table ([[issue]])", type(raw).__name__)
    unknown = sorted(set(raw) - set(_REQUIRED) - set(_OPTIONAL))
    expect(not unknown, where, f"keys among {', '.join(_REQUIRED + _OPTIONAL)}",
           ", ".join(map(repr, unknown)))
    missing = [k for k in _REQUIRED if k not in raw]
    expect(not missing, where, f"the keys {', '.join(_REQUIRED)}",
           f"no {', '.join(missing)}")
    dtypes = _globs(raw["dtypes"], f"{where}.dtypes", "dtype")
    for glob in dtypes:
        expect(bool(fnmatch.filter(FLOAT_DTYPES, glob)), f"{where}.dtypes",
               f"globs matching one of {', '.join(FLOAT_DTYPES)}", repr(glob))
    url = raw.get("url")
    if url is not None:
        expect(isinstance(url, str) and url.startswith("https://") and " " not in url,
               f"{where}.url", "an https:// address", repr(url))
    return KnownIssue(backend=_text(raw["backend"], f"{where}.backend"),
                      cases=_globs(raw["cases"], f"{where}.cases", "case-name"), dtypes=dtypes,
                      reason=_text(raw["reason"], f"{where}.reason"),
                      seen_with=_text(raw["seen_with"], f"{where}.seen_with"), url=url)


def parse_known_issues(text: str, source: str) -> tuple[KnownIssue, ...]:
    """The issues of a known-issues file's ``text``; errors name ``source`` and the field."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        fail(source, "valid TOML", f"a parse error: {exc}")
    unknown = sorted(set(data) - {"format", "issue"})
    expect(not unknown, source, "the keys format and issue", ", ".join(map(repr, unknown)))
    expect(data.get("format") in FORMATS, f"{source}: format",
           f"one of {', '.join(map(str, FORMATS))}", repr(data.get("format")))
    issues = data.get("issue")
    expect(isinstance(issues, list) and bool(issues), f"{source}: issue",
           "a list of [[issue]] tables", type(issues).__name__ if issues is not None else "none")
    return tuple(_issue(raw, f"{source}: issue[{i}]") for i, raw in enumerate(issues))


@functools.cache
def _builtin() -> tuple[KnownIssue, ...]:
    path = importlib.resources.files("ctcbench.cases") / FILE_NAME
    return parse_known_issues(read_text(path, FILE_NAME), FILE_NAME)


def load_known_issues(path: str | Path | None = None) -> tuple[KnownIssue, ...]:
    """The issues in the file ``path``; without one, the built-in table (read once)."""
    if path is None:
        return _builtin()
    path = Path(path)
    return parse_known_issues(read_text(path, path.name), path.name)


def known_issue(backend: str, case: str, dtype: str, issues=None) -> KnownIssue | None:
    """The first issue (of ``issues``, default the built-in table) that matches the row."""
    for issue in load_known_issues() if issues is None else issues:
        if issue.matches(backend, case, dtype):
            return issue
    return None
