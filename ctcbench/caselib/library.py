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
file: docs/case-format.md. Finding, reading and selecting the files, and the fields every case
has: :mod:`ctcbench.caselib.loader`, shared with the decoder case library.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field, fields, replace

from ctcbench.caselib.expect_spec import check_expect
from ctcbench.caselib.judge import DEFAULT_TOLERANCES, Tolerance
from ctcbench.caselib.loader import Library, check_common, select
from ctcbench.core.problem import FLOAT_DTYPES
from ctcbench.errors import expect

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
    where = check_common(raw, source, _FIELDS)
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
    return Case(name=raw["name"], description=raw["description"].strip(),
                provenance=raw["provenance"].strip(), family=family, build=raw["build"],
                expect=raw["expect"], dtypes=dtypes, variants=variants, ordering=ordering,
                tolerances=tolerances, source=source)


LIBRARY = Library("cases", parse_case, nested=True, skip=(DECODER_FOLDER,))


def load_cases(dirs=None) -> list[Case]:
    """Every case in ``dirs`` (folders of .toml/.json files, or one folder; their sub-folders
    too, such as ``cases/peers/``, but not ``decoders/``), or the built-in library."""
    return LIBRARY.load(dirs)


def select_cases(cases: list[Case], patterns=None) -> list[Case]:
    """Cases whose name (or ``family/name``, or ``folder/family/name`` for a file in a
    sub-folder such as ``peers/``) matches any glob; all when no patterns. A glob matching
    none is an error offering the families and the closest name or family."""
    return select(cases, patterns)


def describe(cases: list[Case]) -> list[dict]:
    """One JSON-ready summary per case (what ``ctcbench cases`` prints)."""
    return [{"name": c.name, "family": c.family,
             "oracle": c.expect.get("oracle", "error" if "error" in c.expect else None),
             "dtypes": list(c.dtypes), "variants": [v["transform"] for v in c.variants],
             "ordering": list(c.ordering), "description": c.description,
             "provenance": c.provenance, "source": c.source} for c in cases]
