"""The case library: edge cases with known answers, read from data files.

Cases live in TOML (or JSON) files, one file per family. The built-in library ships as the
package ``ctcbench.cases`` (the repo's ``cases/`` folder); users point ``--cases DIR`` at
their own. One case is a ``[[case]]`` table (JSON: a list under the key ``"case"``) with a
``name`` (unique, used by ``--case`` globs), a ``description``, its ``provenance`` (the paper,
public test or issue the answer comes from), optional ``dtypes`` (default float32 and
float64), ``[case.build]`` (how the problem is made: :mod:`ctcbench.caselib.builders`) and
``[case.expect]`` (the known answer: :mod:`ctcbench.caselib.expected`,
:mod:`ctcbench.caselib.expect_spec`); optionally ``[[case.variant]]`` (invariance transforms,
``builders.TRANSFORMS``), ``ordering`` (sample names, loss increasing) and
``[case.tolerance.DTYPE]`` (merged over ``DEFAULT_TOLERANCES``). The format, with an example
file: docs/case-format.md.
"""
from __future__ import annotations

import difflib
import fnmatch
import importlib.resources
import json
import math
import re
import tomllib
from dataclasses import dataclass, field, fields, replace
from pathlib import Path

from ctcbench.caselib.expect_spec import check_expect
from ctcbench.caselib.known import ATLAS_FILE, FILE_NAME as KNOWN_ISSUES_FILE
from ctcbench.caselib.judge import DEFAULT_TOLERANCES, Tolerance
from ctcbench.core.problem import FLOAT_DTYPES
from ctcbench.files import read_text
from ctcbench.errors import UnknownName, expect, fail

_NAME = re.compile(r"^[a-z0-9][a-z0-9_\-]*$")
_FIELDS = {"name", "description", "provenance", "dtypes", "build", "expect", "variant",
           "ordering", "tolerance", "format"}
DECODER_FOLDER = "decoders"  # the decoder case library (caselib.decoder_cases)
FORMATS = (1, 2)  # format 2 adds the [case.expect] keys of caselib.expect_spec; 1 files still load


@dataclass(frozen=True)
class Case:
    """One edge case: how to build its problem(s) and what the answer must be."""

    name: str
    description: str
    provenance: str
    family: str  # the file stem, e.g. "published"
    build: dict
    expect: dict
    dtypes: tuple[str, ...] = ("float32", "float64")
    variants: tuple[dict, ...] = ()
    ordering: tuple[str, ...] = ()
    tolerances: dict = field(default_factory=dict)  # dtype -> Tolerance
    source: str = ""
    folder: str = ""  # the sub-folder of the library holding the file, e.g. "peers"

    def tolerance(self, dtype: str) -> Tolerance:
        return self.tolerances.get(dtype, DEFAULT_TOLERANCES[dtype])


def parse_case(raw: dict, *, family: str, source: str) -> Case:
    """Validate one raw case table; errors name the file, the case and the field."""
    expect(isinstance(raw, dict), f"{source}: a case", "a table",
           f"{type(raw).__name__} {raw!r}")
    name = raw.get("name")
    where = f"{source}: case {name!r}" if name else f"{source}: a case"
    unknown = sorted(set(raw) - _FIELDS)
    expect(not unknown, where, f"only the fields {', '.join(sorted(_FIELDS))}", unknown)
    expect(isinstance(name, str) and bool(_NAME.match(name)), f"{where} name",
           "lower-case letters, digits, '_' or '-'", repr(name))
    for key in ("description", "provenance"):
        expect(isinstance(raw.get(key), str) and raw[key].strip() != "", f"{where} {key}",
               "a non-empty string", repr(raw.get(key)))
    for key in ("dtypes", "variant", "ordering"):
        expect(isinstance(raw.get(key, []), list), f"{where} {key}", "a list",
               repr(raw.get(key)))
    dtypes = tuple(raw.get("dtypes", ("float32", "float64")))
    bad = [d for d in dtypes if d not in FLOAT_DTYPES]
    expect(dtypes and not bad, f"{where} dtypes", f"a list from {', '.join(FLOAT_DTYPES)}",
           list(dtypes))
    for key in ("build", "expect"):
        expect(isinstance(raw.get(key), dict), f"{where} {key}", "a table", raw.get(key))
    from ctcbench.caselib.builders import GENERATORS, TRANSFORMS
    from ctcbench.caselib.expected import ORACLES
    gen = raw["build"].get("generator")
    expect(isinstance(gen, str) and gen in GENERATORS, f"{where} build.generator",
           f"one of {', '.join(GENERATORS)}", repr(gen))
    fmt = raw.get("format", 1)
    expect(fmt in FORMATS and not isinstance(fmt, bool), f"{where} format",
           f"one of {', '.join(map(str, FORMATS))}", repr(fmt))
    check_expect(raw["expect"], f"{where} expect", fmt=fmt)
    oracle = raw["expect"].get("oracle")
    if "error" not in raw["expect"]:  # a case that must raise has no answer to compute
        expect(isinstance(oracle, str) and oracle in ORACLES, f"{where} expect.oracle",
               f"one of {', '.join(ORACLES)}", repr(oracle))
    variants = tuple(raw.get("variant", ()))
    for v in variants:
        expect(isinstance(v, dict) and isinstance(v.get("transform"), str)
               and v["transform"] in TRANSFORMS,
               f"{where} variant.transform", f"one of {', '.join(TRANSFORMS)}",
               repr(v.get("transform") if isinstance(v, dict) else v))
    ordering = tuple(raw.get("ordering", ()))
    samples = raw["build"].get("sample", [] if gen == "arrays" else None)
    expect(isinstance(samples, list) and (samples or gen == "arrays")
           and all(isinstance(s, dict) for s in samples),
           f"{where} build.sample", "a non-empty list of sample tables", repr(samples))
    names = [s.get("name", f"sample{n}") for n, s in enumerate(samples)]
    expect(all(o in names for o in ordering) and len(ordering) != 1, f"{where} ordering",
           f"two or more sample names from {names}", list(ordering))
    tolerances, keys = {}, [f.name for f in fields(Tolerance)]
    expect(isinstance(raw.get("tolerance", {}), dict), f"{where} tolerance",
           f"tables named after dtypes ({', '.join(FLOAT_DTYPES)})", repr(raw.get("tolerance")))
    for dtype, tol in raw.get("tolerance", {}).items():
        expect(dtype in FLOAT_DTYPES and isinstance(tol, dict), f"{where} tolerance",
               f"tables named after dtypes ({', '.join(FLOAT_DTYPES)})", f"{dtype} = {tol!r}")
        expect(set(tol) <= set(keys), f"{where} tolerance.{dtype}",
               f"keys {', '.join(keys)}", sorted(tol))
        for key, value in tol.items():
            expect(isinstance(value, (int, float)) and not isinstance(value, bool)
                   and math.isfinite(value) and value >= 0, f"{where} tolerance.{dtype}.{key}",
                   "a finite non-negative number", repr(value))
        tolerances[dtype] = replace(DEFAULT_TOLERANCES[dtype], **tol)
    return Case(name=name, description=raw["description"].strip(),
                provenance=raw["provenance"].strip(), family=family, build=raw["build"],
                expect=raw["expect"], dtypes=dtypes, variants=variants, ordering=ordering,
                tolerances=tolerances, source=source)


def read_case_file(path, text: str) -> list[dict]:
    """The raw ``case`` tables of one .toml or .json file's ``text``."""
    name = getattr(path, "name", str(path))
    try:
        data = json.loads(text) if name.endswith(".json") else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        raise ValueError(f"{name}: expected valid {'JSON' if name.endswith('.json') else 'TOML'}, "
                         f"got a parse error: {exc}") from None
    cases = data.get("case") if isinstance(data, dict) else None
    expect(isinstance(cases, list), name, "a list of cases under the key 'case'",
           sorted(data) if isinstance(data, dict) else type(data).__name__)
    return cases


def _case_files(folder, prefix: str = "") -> list:
    """``(sub-folder, file)`` for the case files in ``folder`` and its sub-folders (e.g.
    ``cases/peers/``), by file name."""
    try:
        entries = list(folder.iterdir())
    except OSError as exc:
        raise ValueError(f"cases: expected a readable folder of .toml/.json case files, got "
                         f"{str(folder)!r} ({exc.strerror or type(exc).__name__})") from None
    files = [(prefix, p) for p in entries
             if p.name.endswith((".toml", ".json")) and p.name not in (KNOWN_ISSUES_FILE, ATLAS_FILE)]
    for sub in sorted((p for p in entries if p.is_dir() and p.name != DECODER_FOLDER),
                      key=lambda p: p.name):  # cases/decoders/ holds decoder cases
        files += _case_files(sub, f"{prefix}/{sub.name}" if prefix else sub.name)
    return sorted(files, key=lambda f: f[1].name)


def load_cases(dirs=None) -> list[Case]:
    """Every case in ``dirs`` (folders of .toml/.json files, or one folder), or the
    built-in library."""
    if isinstance(dirs, (str, Path)):  # one folder, not a sequence of one-letter names
        dirs = [dirs]
    if dirs:
        folders = []
        for d in dirs:
            path = Path(d)
            expect(path.is_dir(), "cases", "a folder of .toml/.json case files", str(d))
            folders.append(path)
    else:
        folders = [importlib.resources.files("ctcbench.cases")]
    cases, seen = [], {}
    for folder in folders:
        files = _case_files(folder)
        expect(bool(files), "cases", "a folder holding .toml or .json case files",
               f"none in {folder}")
        for sub, path in files:
            family = path.name.rsplit(".", 1)[0]
            for raw in read_case_file(path, read_text(path, path.name)):
                case = replace(parse_case(raw, family=family, source=path.name), folder=sub)
                expect(case.name not in seen, f"{path.name}: case {case.name!r}",
                       "a unique name", f"a duplicate of one in {seen.get(case.name)}")
                seen[case.name] = path.name
                cases.append(case)
    return cases


def select_cases(cases: list[Case], patterns=None) -> list[Case]:
    """Cases whose name (or ``family/name``, or ``folder/family/name`` for a file in a
    sub-folder such as ``peers/``) matches any glob; all when no patterns."""
    if isinstance(patterns, str):  # one glob, not a sequence of one-letter globs
        patterns = [patterns]
    if not patterns:
        return list(cases)
    chosen = []
    for pattern in patterns:
        hits = [c for c in cases if fnmatch.fnmatchcase(c.name, pattern)
                or fnmatch.fnmatchcase(f"{c.family}/{c.name}", pattern)
                or (c.folder and fnmatch.fnmatchcase(f"{c.folder}/{c.family}/{c.name}", pattern))]
        if not hits:
            _no_case_matches(pattern, cases)
        chosen += [c for c in hits if c not in chosen]
    return [c for c in cases if c in chosen]


def _no_case_matches(pattern: str, cases: list[Case]) -> None:
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


def describe(cases: list[Case]) -> list[dict]:
    """One JSON-ready summary per case (what ``ctcbench cases`` prints)."""
    return [{"name": c.name, "family": c.family,
             "oracle": c.expect.get("oracle", "error" if "error" in c.expect else None),
             "dtypes": list(c.dtypes), "variants": [v["transform"] for v in c.variants],
             "ordering": list(c.ordering), "description": c.description,
             "provenance": c.provenance, "source": c.source} for c in cases]
