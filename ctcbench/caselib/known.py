"""Known issues and the atlas, the two tables of upstream CTC bugs beside the cases.

``cases/known_issues.toml`` has one ``[[issue]]`` per bug of a built-in backend (``compare``
records a failing row an issue matches as ``known``); ``cases/atlas.toml`` one ``[[entry]]``
per CTC bug stated as a problem (``ctcbench atlas`` tries them). One loader reads both: a row
class's fields are its file's keys (required where there is no default), each with the check
of its value. A malformed file is one ValueError, ``FILE: issue[3].dtypes: expected X, got Y``.
"""
from __future__ import annotations

import dataclasses
import fnmatch
import functools
import importlib.resources
import re
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from packaging.version import InvalidVersion, Version

from ctcbench.core.problem import FLOAT_DTYPES
from ctcbench.errors import expect
from ctcbench.files import parse_text, read_text
from ctcbench.runtime.devices import DEVICES

FILE_NAME = "known_issues.toml"  # in a case folder, these two names hold tables, not cases
ATLAS_FILE = "atlas.toml"
FORMATS = (1,)
# atlas.toml names a device as the upstream threads do, "gpu" for a CUDA/cuDNN path
# (docs/atlas.md): the file keeps that word, mapped here from the runtime's device names
FILE_DEVICES = {"cpu": "cpu", "cuda": "gpu"}


# -- checks of one value: each returns the value as the row keeps it, or raises naming `where`
def _value(ok, expected: str):
    def check(value, where: str):
        expect(ok(value), where, expected, repr(value))
        return value
    return check


_text = _value(lambda v: isinstance(v, str) and bool(v) and v.strip() == v,
               "a non-empty string without surrounding spaces")
_url = _value(lambda v: isinstance(v, str) and v.startswith("https://") and " " not in v,
              "an https:// address")


def _one_of(choices: tuple[str, ...]):
    return _value(lambda v: v in choices, f"one of {', '.join(choices)}")


def _globs(what: str, matching: tuple[str, ...] = ()):
    """A non-empty list of ``what`` globs, kept as a tuple, each matching one of ``matching``
    where that is given."""
    def check(value, where: str) -> tuple[str, ...]:
        expect(isinstance(value, list) and bool(value)
               and all(isinstance(g, str) and g for g in value),
               where, f"a non-empty list of {what} globs", repr(value))
        for glob in value if matching else ():
            expect(bool(fnmatch.filter(matching, glob)), where,
                   f"globs matching one of {', '.join(matching)}", repr(glob))
        return tuple(value)
    return check


# where an entry's upstream thread (issue, PR, advisory) stood when it was last read
UPSTREAM_STATES = ("open", "closed", "merged", "published", "not found")
_RELEASE = re.compile(r"(?P<dist>[A-Za-z][A-Za-z0-9._-]*) (?P<version>[0-9][^ ]*)")
_FIX = re.compile(r"[\w.-]+/[\w.-]+ (PR#[0-9]+|@[0-9a-f]{7,40})")


def release_of(fixed_in: str) -> tuple[str, Version] | None:
    """``"torch 2.4.0"`` -> ``("torch", Version("2.4.0"))``; None for a PR or a commit."""
    m = _RELEASE.fullmatch(fixed_in)
    try:
        return (m["dist"], Version(m["version"])) if m else None
    except InvalidVersion:
        return None


def _fixed_in(value, where: str) -> str:
    expect(isinstance(value, str) and (release_of(value) is not None
                                       or _FIX.fullmatch(value) is not None), where,
           "a release 'DIST VERSION' (torch 2.4.0) or a fix 'OWNER/REPO PR#N' or "
           "'OWNER/REPO@COMMIT'", repr(value))
    return value


def _date(value, where: str) -> str:
    try:
        ok = isinstance(value, str) and date.fromisoformat(value).isoformat() == value
    except ValueError:
        ok = False
    expect(ok, where, "a date YYYY-MM-DD (a string)", repr(value))
    return value


def _key(check=_text, default=dataclasses.MISSING):
    """A row's field as a key of its file: required unless it has a default."""
    return dataclasses.field(default=default, metadata={"check": check})


@dataclass(frozen=True)
class KnownIssue:
    """One upstream bug or limit of ``backend`` on the cases and dtypes its globs match."""

    backend: str = _key()  # a built-in backend's name
    cases: tuple[str, ...] = _key(_globs("case-name"))
    dtypes: tuple[str, ...] = _key(_globs("dtype", FLOAT_DTYPES))
    reason: str = _key()
    seen_with: str = _key()  # the upstream release it was seen with
    url: str | None = _key(_url, None)
    atlas: str | None = _key(default=None)  # the id of its entry in the atlas

    def matches(self, backend: str, case: str, dtype: str) -> bool:
        return (backend == self.backend and any(fnmatch.fnmatchcase(case, g) for g in self.cases)
                and any(fnmatch.fnmatchcase(dtype, g) for g in self.dtypes))


SIGNS = ("raises", "crashes", "hangs", "returns sane", "returns garbage", "gradient nan",
         "gradient zero", "gradient nonzero")  # what a probe can show (runtime.malformed)


def _probe(value, where: str) -> str:
    from ctcbench.runtime.malformed import PROBES  # the runtime's table of probes
    return _one_of(tuple(p.name for p in PROBES))(value, where)


@dataclass(frozen=True)
class AtlasEntry:
    """One CTC bug: what has it, what goes wrong, where (``device``), who says so
    (``source``, ``url``), the releases it is known in and fixed in, and how it is tried:
    a case of the library (``backend``, ``case``, ``dtype``: that row), or a ``probe`` of
    ``ctcbench.runtime.malformed`` on ``backend``'s own call, the bug being present when the
    call ``shows`` one of the signs listed; or ``not_tried``, why it cannot be tried here.
    ``upstream_state``, ``checked`` and ``upstream_note``: where the upstream thread (``url``
    where it is one, else the first one ``source`` names) stood on the day it was read;
    ``fixed_in`` is a release ``DIST VERSION`` or a fix ``OWNER/REPO PR#N`` (``release_of``
    tells which)."""

    id: str = _key()
    implementation: str = _key()
    problem: str = _key()
    device: str = _key(_one_of(tuple(FILE_DEVICES[d] for d in DEVICES)))  # as the file says it
    source: str = _key()
    url: str | None = _key(_url, None)
    known_in: str | None = _key(default=None)
    fixed_in: str | None = _key(_fixed_in, None)  # as the thread or release notes say
    upstream_state: str | None = _key(_one_of(UPSTREAM_STATES), None)  # the thread's state
    checked: str | None = _key(_date, None)  # the day it was read
    upstream_note: str | None = _key(default=None)  # what the thread says of a fix
    backend: str | None = _key(default=None)
    case: str | None = _key(default=None)
    dtype: str | None = _key(_one_of(FLOAT_DTYPES), None)
    probe: str | None = _key(_probe, None)
    shows: tuple[str, ...] | None = _key(_globs("sign", SIGNS), None)
    not_tried: str | None = _key(default=None)

    @property
    def tryable(self) -> bool:
        """Whether a case of the library or a probe shows it."""
        return self.case is not None or self.probe is not None


@dataclass(frozen=True)
class _Kind:
    """A table file: its built-in name, its ``[[table]]`` key, the class of one row, the keys
    given all together or not at all, and the key whose value no two rows share."""

    file: str
    table: str
    row: type
    together: tuple[tuple[str, ...], ...] = ()  # groups of keys given all together or not at all
    needs: tuple[tuple[str, str], ...] = ()  # (key, the key it needs beside it)
    unique: str | None = None


_ISSUES = _Kind(FILE_NAME, "issue", KnownIssue)
_ATLAS = _Kind(ATLAS_FILE, "entry", AtlasEntry,
               together=(("case", "dtype"), ("probe", "shows"), ("upstream_state", "checked")),
               needs=(("case", "backend"), ("probe", "backend"), ("backend", "case|probe"),
                      ("upstream_note", "upstream_state")),
               unique="id")


def _row(kind: _Kind, raw, where: str):
    """One ``[[table]]`` as ``kind.row``: its keys are the row's fields, each value checked."""
    fields = dataclasses.fields(kind.row)
    keys = [f.name for f in fields]
    required = [f.name for f in fields if f.default is dataclasses.MISSING]
    expect(isinstance(raw, dict), where, f"a table ([[{kind.table}]])", type(raw).__name__)
    unknown = sorted(set(raw) - set(keys))
    expect(not unknown, where, f"keys among {', '.join(keys)}", ", ".join(map(repr, unknown)))
    missing = [k for k in required if k not in raw]
    expect(not missing, where, f"the keys {', '.join(required)}", f"no {', '.join(missing)}")
    for group in kind.together:
        given = [k for k in group if k in raw]
        expect(len(given) in (0, len(group)), where, f"all of {', '.join(group)} or none",
               f"only {', '.join(given)}")
    for key, needed in kind.needs:
        alternatives = needed.split("|")
        expect(key not in raw or any(k in raw for k in alternatives), where,
               f"{' or '.join(alternatives)} beside {key}", f"no {' or '.join(alternatives)}")
    return kind.row(**{f.name: f.metadata["check"](raw[f.name], f"{where}.{f.name}")
                       for f in fields if f.name in raw})


def _parse(kind: _Kind, text: str, source: str) -> tuple:
    """The rows of a file's ``text`` that holds ``format`` and the ``[[table]]`` list only."""
    data = parse_text(text, source, "TOML")
    key = kind.table
    unknown = sorted(set(data) - {"format", key})
    expect(not unknown, source, f"the keys format and {key}", ", ".join(map(repr, unknown)))
    expect(data.get("format") in FORMATS, f"{source}: format",
           f"one of {', '.join(map(str, FORMATS))}", repr(data.get("format")))
    raws = data.get(key)
    expect(isinstance(raws, list) and bool(raws), f"{source}: {key}",
           f"a list of [[{key}]] tables", type(raws).__name__ if raws is not None else "none")
    rows = tuple(_row(kind, raw, f"{source}: {key}[{i}]") for i, raw in enumerate(raws))
    if kind.unique:
        values = [getattr(row, kind.unique) for row in rows]
        twice = sorted({v for v in values if values.count(v) > 1})
        expect(not twice, f"{source}: {key} {kind.unique}s", f"each {kind.unique} once",
               ", ".join(twice))
    return rows


@functools.cache
def _builtin(kind: _Kind) -> tuple:
    path = importlib.resources.files("ctcbench.cases") / kind.file
    return _parse(kind, read_text(path, kind.file), kind.file)


def _load(kind: _Kind, path: str | Path | None) -> tuple:
    """The rows of the file ``path``; without one, the built-in file (read once)."""
    if path is None:
        return _builtin(kind)
    path = Path(path)
    return _parse(kind, read_text(path, path.name), path.name)


def load_known_issues(path: str | Path | None = None) -> tuple[KnownIssue, ...]:
    """The issues in the file ``path``; without one, the built-in table (read once)."""
    return _load(_ISSUES, path)


def load_atlas(path: str | Path | None = None) -> tuple[AtlasEntry, ...]:
    """The entries of the atlas file ``path``; without one, the built-in atlas (read once)."""
    return _load(_ATLAS, path)


def known_issue(backend: str, case: str, dtype: str, issues=None) -> KnownIssue | None:
    """The first issue (of ``issues``, default the built-in table) that matches the row."""
    for issue in load_known_issues() if issues is None else issues:
        if issue.matches(backend, case, dtype):
            return issue
    return None
