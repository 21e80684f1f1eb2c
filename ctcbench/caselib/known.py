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
    atlas = "warpctc-sigfpe-all-empty-targets" # optional: its entry in the atlas

The atlas, ``cases/atlas.toml``, is the wider table it grows into: one ``[[entry]]`` per real
CTC bug that can be stated as a problem (the implementation, the upstream thread, the releases
known in and fixed in, CPU or GPU only, and where a library case shows it, that backend, case
and dtype); ``ctcbench atlas`` tries those on the installed stack.

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
_OPTIONAL = ("url", "atlas")


@dataclass(frozen=True)
class KnownIssue:
    """One upstream bug or limit of ``backend`` on the cases and dtypes its globs match."""

    backend: str
    cases: tuple[str, ...]
    dtypes: tuple[str, ...]
    reason: str
    seen_with: str
    url: str | None = None
    atlas: str | None = None  # the id of its entry in the atlas (atlas.toml)

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
                      seen_with=_text(raw["seen_with"], f"{where}.seen_with"), url=url,
                      atlas=_text(raw["atlas"], f"{where}.atlas") if "atlas" in raw else None)


def parse_known_issues(text: str, source: str) -> tuple[KnownIssue, ...]:
    """The issues of a known-issues file's ``text``; errors name ``source`` and the field."""
    issues = _tables(text, source, "issue")
    return tuple(_issue(raw, f"{source}: issue[{i}]") for i, raw in enumerate(issues))


def _tables(text: str, source: str, key: str) -> list:
    """The ``[[key]]`` tables of a TOML file's ``text`` that holds ``format`` and them only."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        fail(source, "valid TOML", f"a parse error: {exc}")
    unknown = sorted(set(data) - {"format", key})
    expect(not unknown, source, f"the keys format and {key}", ", ".join(map(repr, unknown)))
    expect(data.get("format") in FORMATS, f"{source}: format",
           f"one of {', '.join(map(str, FORMATS))}", repr(data.get("format")))
    tables = data.get(key)
    expect(isinstance(tables, list) and bool(tables), f"{source}: {key}",
           f"a list of [[{key}]] tables", type(tables).__name__ if tables is not None else "none")
    return tables


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


# -- the atlas: every real CTC bug ctcbench knows of, stated as a problem --------------------
ATLAS_FILE = "atlas.toml"  # beside known_issues.toml; in a case folder, never read as cases
DEVICES = ("cpu", "gpu")
_ENTRY_REQUIRED = ("id", "implementation", "problem", "device", "source")
_ENTRY_OPTIONAL = ("url", "known_in", "fixed_in", "backend", "case", "dtype")
_TRY = ("backend", "case", "dtype")  # given together, or not at all


@dataclass(frozen=True)
class AtlasEntry:
    """One CTC bug: what has it, what goes wrong, where (``device``), who says so
    (``source``, ``url``), the releases it is known in and fixed in, and, where a case of the
    library shows it, the ``backend``, ``case`` and ``dtype`` of that row."""

    id: str
    implementation: str
    problem: str
    device: str
    source: str
    url: str | None = None
    known_in: str | None = None
    fixed_in: str | None = None
    backend: str | None = None
    case: str | None = None
    dtype: str | None = None

    @property
    def tryable(self) -> bool:
        """Whether a case of the library shows it (``backend``, ``case``, ``dtype`` given)."""
        return self.case is not None


def _url(value, where: str) -> str:
    expect(isinstance(value, str) and value.startswith("https://") and " " not in value,
           where, "an https:// address", repr(value))
    return value


def _entry(raw, where: str) -> AtlasEntry:
    expect(isinstance(raw, dict), where, "a table ([[entry]])", type(raw).__name__)
    unknown = sorted(set(raw) - set(_ENTRY_REQUIRED) - set(_ENTRY_OPTIONAL))
    expect(not unknown, where, f"keys among {', '.join(_ENTRY_REQUIRED + _ENTRY_OPTIONAL)}",
           ", ".join(map(repr, unknown)))
    missing = [k for k in _ENTRY_REQUIRED if k not in raw]
    expect(not missing, where, f"the keys {', '.join(_ENTRY_REQUIRED)}", f"no {', '.join(missing)}")
    given = [k for k in _TRY if k in raw]
    expect(len(given) in (0, len(_TRY)), where, f"all of {', '.join(_TRY)} or none",
           f"only {', '.join(given)}")
    expect(raw["device"] in DEVICES, f"{where}.device", f"one of {', '.join(DEVICES)}",
           repr(raw["device"]))
    if "dtype" in raw:
        expect(raw["dtype"] in FLOAT_DTYPES, f"{where}.dtype",
               f"one of {', '.join(FLOAT_DTYPES)}", repr(raw["dtype"]))
    values = {k: _text(raw[k], f"{where}.{k}") for k in raw if k != "url"}
    if "url" in raw:
        values["url"] = _url(raw["url"], f"{where}.url")
    return AtlasEntry(**values)


def parse_atlas(text: str, source: str) -> tuple[AtlasEntry, ...]:
    """The entries of an atlas file's ``text``; errors name ``source`` and the field."""
    raws = _tables(text, source, "entry")
    entries = tuple(_entry(raw, f"{source}: entry[{i}]") for i, raw in enumerate(raws))
    ids = [e.id for e in entries]
    twice = sorted({i for i in ids if ids.count(i) > 1})
    expect(not twice, f"{source}: entry ids", "each id once", ", ".join(twice))
    return entries


@functools.cache
def _builtin_atlas() -> tuple[AtlasEntry, ...]:
    path = importlib.resources.files("ctcbench.cases") / ATLAS_FILE
    return parse_atlas(read_text(path, ATLAS_FILE), ATLAS_FILE)


def load_atlas(path: str | Path | None = None) -> tuple[AtlasEntry, ...]:
    """The entries of the atlas file ``path``; without one, the built-in atlas (read once)."""
    if path is None:
        return _builtin_atlas()
    path = Path(path)
    return parse_atlas(read_text(path, path.name), path.name)
