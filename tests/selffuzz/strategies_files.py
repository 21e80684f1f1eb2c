"""Hypothesis strategies for the files ctcbench reads: valid files of the project's own (the
built-in case libraries, known issues, atlas) mutated field by field, every key and type drawn
from the project's declarations, and the writers that put a mutated table back on disk."""
from __future__ import annotations

import copy
import dataclasses
import importlib.resources
import json
import math
import tomllib

from hypothesis import strategies as st

from ctcbench.caselib import builders, decoder_cases, expect_spec, known, library
from ctcbench.caselib.judge import Tolerance
from ctcbench.caselib.loader import NOT_CASES

# -- what the project declares: the keys of every table of its files ------------------------
CASE_KEYS = frozenset(
    set(library._FIELDS) | set(builders.BUILD_KEYS) | set(builders.SAMPLE_KEYS)
    | {k for keys in builders.GENERATOR_KEYS.values() for k in keys}
    | {k for keys in builders.TRANSFORM_KEYS.values() for k in keys} | {"transform", "also"}
    | set(expect_spec._KEYS) | set(expect_spec.FD_DEFAULTS) | {"coords", "type", "match"}
    | {f.name for f in dataclasses.fields(Tolerance)} | {"float16", "bfloat16", "float32", "float64"}
    | set(decoder_cases._FIELDS) | set(decoder_cases._SAMPLE) | set(decoder_cases._RANDOM))
TABLE_KEYS = frozenset({f.name for row in (known.KnownIssue, known.AtlasEntry)
                        for f in dataclasses.fields(row)} | {"format", "issue", "entry"})

# -- values a field may be given: every type TOML and JSON can spell, edges of each ---------
EDGE_INTS = (-1, 0, 1, 2, 3, 2**31, 2**32, 2**63 - 1, 2**63, -(2**63) - 1, 10**6, 10**7, 10**12,
             10**30)
EDGE_FLOATS = (math.nan, math.inf, -math.inf, -0.0, 0.5, -0.5, 1e-300, 1e300, 1.5, 2.0)
EDGE_TEXT = ("", " ", "é", "💥", "\u200b", "nan", "1", "true", "float32", "exact", "../x",
             "a" * 300, "x\ny")
scalars = st.one_of(st.none(), st.booleans(), st.sampled_from(EDGE_INTS),
                    st.integers(-5, 40), st.sampled_from(EDGE_FLOATS),
                    st.floats(allow_nan=True, allow_infinity=True), st.sampled_from(EDGE_TEXT),
                    st.text(max_size=6))
values = st.one_of(scalars, st.lists(scalars, max_size=3),
                   st.lists(st.lists(st.integers(-2, 5), max_size=3), max_size=3),
                   st.dictionaries(st.sampled_from(sorted(CASE_KEYS)), scalars, max_size=2))


def misspellings(key: str) -> list[str]:
    """Keys one edit away from ``key`` (a letter dropped, doubled, swapped, changed case) that
    the project declares nowhere, so the file can only mean ``key``."""
    out = set()
    for i in range(len(key)):
        out.add(key[:i] + key[i + 1:])
        out.add(key[:i] + key[i] + key[i:])
        out.add(key[:i] + key[i].swapcase() + key[i + 1:])
        if i + 1 < len(key):
            out.add(key[:i] + key[i + 1] + key[i] + key[i + 2:])
    return sorted(k for k in out if k and k not in CASE_KEYS | TABLE_KEYS)


def _spots(node, path=()):
    """``(path, value)`` of every value inside ``node`` (dicts and lists), the root too."""
    yield path, node
    items = node.items() if isinstance(node, dict) else (
        enumerate(node) if isinstance(node, list) else ())
    for k, v in items:
        yield from _spots(v, path + (k,))


def _at(node, path):
    for k in path:
        node = node[k]
    return node


def kept(raw, mutation) -> bool:
    """Whether the key a mutation misspelt or added is still in ``raw`` (a later mutation
    of the same example may have deleted or replaced its table)."""
    node = raw
    try:
        for k in mutation.path:
            node = node[k]
    except (KeyError, IndexError, TypeError):
        return False
    # a None value: TOML has none, so the writer leaves the key out
    return isinstance(node, dict) and node.get(mutation.key) is not None


@dataclasses.dataclass(frozen=True)
class Mutation:
    """What was done, where: ``op`` at ``path`` (``key`` for a renamed or added key)."""

    op: str
    path: tuple
    key: str | None = None

    @property
    def refusable(self) -> bool:
        """A misspelt or unknown key: the file means something the reader must refuse or say."""
        return self.op in ("misspell", "unknown_key")


OPS = ("replace", "delete", "misspell", "unknown_key", "retype", "grow", "shrink", "huge",
       "duplicate")


@st.composite
def mutated(draw, raw, *, fixed=()):
    """``(copy of raw with 1-3 mutations, [Mutation])``; ``fixed`` paths are left alone."""
    raw = copy.deepcopy(raw)
    done = []
    for _ in range(draw(st.integers(1, 3))):
        spots = [(p, v) for p, v in _spots(raw) if p not in fixed]
        path, value = draw(st.sampled_from(spots))
        op = draw(st.sampled_from(OPS))
        parent = _at(raw, path[:-1]) if path else None
        if op == "replace" and path:
            parent[path[-1]] = draw(values)
        elif op == "delete" and path:
            del parent[path[-1]]
        elif op == "misspell" and path and isinstance(parent, dict) and misspellings(path[-1]):
            new = draw(st.sampled_from(misspellings(path[-1])))
            if new in parent:
                continue
            parent[new] = parent.pop(path[-1])
            done.append(Mutation(op, path[:-1], new))
            continue
        elif op == "unknown_key" and isinstance(value, dict):
            key = draw(st.one_of(st.sampled_from(("notes", "sample_", "Name", "extra_field")),
                                 st.text(min_size=1, max_size=5)))
            if key in value or key in CASE_KEYS | TABLE_KEYS:
                continue
            value[key] = draw(values)
            done.append(Mutation(op, path, key))
            continue
        elif op == "retype" and path:
            parent[path[-1]] = _retyped(value)
        elif op == "grow" and isinstance(value, list):
            value.extend(copy.deepcopy(value[-1:]) * draw(st.integers(1, 3)) or [draw(scalars)])
        elif op == "shrink" and isinstance(value, list) and value:
            del value[draw(st.integers(0, len(value) - 1))]
        elif op == "huge" and path and isinstance(value, (int, float)) and not isinstance(value, bool):
            parent[path[-1]] = draw(st.sampled_from((10**6, 10**9, 2**63, 10**30, 1e308, -10**9)))
        elif op == "duplicate" and path and isinstance(parent, list):
            parent.insert(path[-1], copy.deepcopy(value))
        else:
            continue
        done.append(Mutation(op, path))
    return raw, done


def _retyped(value):
    """``value`` in another type that reads alike: 3 -> 3.0 or "3", [1] -> 1, "x" -> ["x"]."""
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return float(value)
    if isinstance(value, float):
        return str(value)
    if isinstance(value, str):
        return [value]
    if isinstance(value, list):
        return value[0] if value else {}
    if isinstance(value, dict):
        return [value]
    return 0


# -- writers: a table back to TOML or JSON ----------------------------------------------------
def _toml_value(x) -> str:
    if isinstance(x, bool):
        return "true" if x else "false"
    if isinstance(x, int):
        return str(x)
    if isinstance(x, float):
        return ("nan" if math.isnan(x) else ("inf" if x > 0 else "-inf")) if not math.isfinite(x) \
            else repr(x)
    if isinstance(x, str):
        return json.dumps(x)  # a TOML basic string; lone surrogates make the file invalid TOML
    if isinstance(x, list):
        return "[" + ", ".join(_toml_value(v) for v in x if v is not None) + "]"
    if isinstance(x, dict):
        return "{" + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in x.items()
                               if v is not None) + "}"
    raise TypeError(type(x))


def to_toml(data: dict) -> str:
    """``data`` (a dict of scalars, tables and lists of tables) as TOML; None is left out."""
    lines = []
    for key, value in data.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            for row in value:
                lines.append(f"[[{json.dumps(str(key))}]]")
                lines += [f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in row.items()
                          if v is not None]
        elif value is not None:
            lines.insert(0, f"{json.dumps(str(key))} = {_toml_value(value)}")
    return "\n".join(lines) + "\n"


def to_json(data) -> str:
    return json.dumps(data)  # NaN and Infinity as Python's json writes and reads them


# -- the project's own files, the seeds every mutation starts from ---------------------------
def _package_toml(*parts) -> dict:
    path = importlib.resources.files("ctcbench.cases").joinpath(*parts)
    return tomllib.loads(path.read_text(encoding="utf-8"))


def builtin_cases() -> list[tuple[str, dict]]:
    """``(family, raw case table)`` of every case of the built-in loss library."""
    out = []
    root = importlib.resources.files("ctcbench.cases")
    for folder in (root, root / "peers"):
        for f in sorted(folder.iterdir(), key=lambda p: p.name):
            if f.name.endswith(".toml") and f.name not in NOT_CASES:
                out += [(f.name[:-5], c) for c in tomllib.loads(f.read_text("utf-8"))["case"]]
    return out


def builtin_decoder_cases() -> list[tuple[str, dict]]:
    folder = importlib.resources.files("ctcbench.cases") / library.DECODER_FOLDER
    return [(f.name[:-5], c) for f in sorted(folder.iterdir(), key=lambda p: p.name)
            if f.name.endswith(".toml") for c in tomllib.loads(f.read_text("utf-8"))["case"]]


def builtin_table(file: str) -> dict:
    """``known_issues.toml`` or ``atlas.toml`` as a dict."""
    return _package_toml(file)
