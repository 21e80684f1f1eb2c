"""Case files found, read and selected: what the loss and the decoder case libraries share.

A library is one or more folders of TOML (or JSON) files, one family per file (the file's
stem), each a list of ``[[case]]`` tables (JSON: a list under the key ``"case"``). Each
library parses its own tables (:mod:`ctcbench.caselib.library`,
:mod:`ctcbench.caselib.decoder_cases`); here, once for both: finding and reading the files,
the fields every case has (``name``, ``description``, ``provenance``), names unique across
the library, and choosing cases by glob. Every error names the file, the case and the field.
"""
from __future__ import annotations

import difflib
import fnmatch
import importlib.resources
import re
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from ctcbench.caselib.known import ATLAS_FILE, FILE_NAME as KNOWN_ISSUES_FILE
from ctcbench.errors import UnknownName, expect, fail
from ctcbench.files import parse_text, read_text

NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")  # a case's name: what --case globs match
NOT_CASES = (KNOWN_ISSUES_FILE, ATLAS_FILE)  # data files beside the case files, not case files


@dataclass(frozen=True)
class Library:
    """One kind of case library: what its errors call it, how it parses one table, where its
    built-in files lie in the package ``ctcbench.cases``, and whether it reads sub-folders."""

    what: str  # the name its errors give it: "cases", "decoder cases"
    parse: Callable  # (raw table, *, family, source) -> a case with name, family and folder
    builtin: str = ""  # its folder in the package ctcbench.cases ("": the package's own)
    nested: bool = False  # files in sub-folders too (cases/peers/): the case's ``folder``
    skip: tuple[str, ...] = ()  # sub-folders holding another library

    def load(self, dirs=None) -> list:
        """Every case in ``dirs`` (folders of .toml/.json files, or one folder), or the
        built-in library; a name twice is an error naming both files."""
        if isinstance(dirs, (str, Path)):  # one folder, not a sequence of one-letter names
            dirs = [dirs]
        if not dirs:  # the package's own files (a wheel that lacks them is caught here)
            package = importlib.resources.files("ctcbench.cases")
            dirs = [package.joinpath(self.builtin) if self.builtin else package]
        folders = []
        for d in dirs:  # every folder checked before any file is read
            path = d if hasattr(d, "iterdir") else Path(d)
            expect(path.is_dir(), self.what, "a folder of .toml/.json case files", str(d))
            folders.append(path)
        cases, seen = [], {}
        for folder in folders:
            files = self._files(folder)
            expect(bool(files), self.what, "a folder holding .toml or .json case files",
                   f"none in {folder}")
            for sub, path in files:
                family = path.name.rsplit(".", 1)[0]
                for raw in read_case_file(path, read_text(path, path.name)):
                    case = self.parse(raw, family=family, source=path.name)
                    case = replace(case, folder=sub) if sub else case
                    expect(case.name not in seen, f"{path.name}: case {case.name!r}",
                           "a unique name", f"a duplicate of one in {seen.get(case.name)}")
                    seen[case.name] = path.name
                    cases.append(case)
        return cases

    def _files(self, folder, prefix: str = "") -> list:
        """``(sub-folder, file)`` for the case files in ``folder`` (and, for a nested
        library, its sub-folders), by file name."""
        try:
            entries = list(folder.iterdir())
        except OSError as exc:
            raise ValueError(f"{self.what}: expected a readable folder of .toml/.json case "
                             f"files, got {str(folder)!r} "
                             f"({exc.strerror or type(exc).__name__})") from None
        files = [(prefix, p) for p in entries
                 if p.name.endswith((".toml", ".json")) and p.name not in NOT_CASES]
        if self.nested:
            for sub in sorted((p for p in entries if p.is_dir() and p.name not in self.skip),
                              key=lambda p: p.name):
                files += self._files(sub, f"{prefix}/{sub.name}" if prefix else sub.name)
        return sorted(files, key=lambda f: f[1].name)


def read_case_file(path, text: str) -> list[dict]:
    """The raw ``case`` tables of one .toml or .json file's ``text``."""
    name = getattr(path, "name", str(path))
    data = parse_text(text, name, "JSON" if name.endswith(".json") else "TOML")
    cases = data.get("case") if isinstance(data, dict) else None
    expect(isinstance(cases, list), name, "a list of cases under the key 'case'",
           sorted(data) if isinstance(data, dict) else type(data).__name__)
    return cases


def check_common(raw, source: str, allowed) -> str:
    """Check what every case table has: a table of only the ``allowed`` fields, a ``name``
    (lower-case letters, digits, '_' or '-'), a ``description`` and a ``provenance``. Returns
    the prefix its other errors start with: ``FILE: case 'NAME'``."""
    expect(isinstance(raw, dict), f"{source}: a case", "a table",
           f"{type(raw).__name__} {raw!r}")
    name = raw.get("name")
    where = f"{source}: case {name!r}" if name else f"{source}: a case"
    unknown = sorted(set(raw) - set(allowed))
    expect(not unknown, where, f"only the fields {', '.join(sorted(allowed))}", unknown)
    expect(isinstance(name, str) and bool(NAME.match(name)), f"{where} name",
           "lower-case letters, digits, '_' or '-'", repr(name))
    for key in ("description", "provenance"):
        expect(isinstance(raw.get(key), str) and raw[key].strip() != "", f"{where} {key}",
               "a non-empty string", repr(raw.get(key)))
    return where


def matches(case, pattern: str) -> bool:
    """``case``'s name, ``family/name`` or ``folder/family/name`` matches the glob."""
    return (fnmatch.fnmatchcase(case.name, pattern)
            or fnmatch.fnmatchcase(f"{case.family}/{case.name}", pattern)
            or bool(case.folder) and fnmatch.fnmatchcase(
                f"{case.folder}/{case.family}/{case.name}", pattern))


def select(cases: list, patterns=None, *, strict: bool = True) -> list:
    """The cases any glob :func:`matches`, in library order; all when no patterns. ``strict``:
    a glob matching none is an error offering the families and the closest name or family."""
    if isinstance(patterns, str):  # one glob, not a sequence of one-letter globs
        patterns = [patterns]
    if not patterns:
        return list(cases)
    chosen = set()
    for pattern in patterns:
        hits = {i for i, case in enumerate(cases) if matches(case, pattern)}
        if strict and not hits:
            _no_match(pattern, cases)
        chosen |= hits
    return [case for i, case in enumerate(cases) if i in chosen]


def _no_match(pattern: str, cases: list) -> None:
    """Raise: ``pattern`` matched no case. Offers the families (a library has too many names
    to list) and the closest family or name, as ``one_of`` does."""
    families = sorted({c.family for c in cases})
    parts = pattern.split("/")  # [folder/]family/name
    if len(parts) > 1:
        near = difflib.get_close_matches(parts[-2], families, n=1, cutoff=0.6)
        hint = ["/".join(parts[:-2] + near + parts[-1:])] if near else []
    else:
        hint = difflib.get_close_matches(pattern, [c.name for c in cases], n=1, cutoff=0.6)
    got = f"{pattern!r}" + (f" (did you mean {hint[0]!r}?)" if hint else "")
    fail("case", "a name or glob matching at least one case, such as "
         f"'FAMILY/*' of the families {', '.join(families)}", got, UnknownName)
