"""What a driver declares about the run folders it writes (``RunKind``), and the one reader of
a folder's ``meta.json``, which tells its kind and refuses what this version cannot read."""
from __future__ import annotations

import importlib
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ctcbench.errors import fail
from ctcbench.files import parse_text, read_text

META, ROWS = "meta.json", "rows.jsonl"
STATUS_LIKE = re.compile(r"(^|_)status$")  # columns a kind must declare: status, past_status

# The words one status column may hold: an Enum, or a tuple of Enums, their members and None
# (the column may be null); each Enum declared where its concept belongs, never bare strings.
Words = type[Enum] | tuple


def words(spec: Words) -> tuple:
    """The values ``spec`` allows, in its order: each Enum's values, None where it is named."""
    out = []
    for item in spec if isinstance(spec, tuple) else (spec,):
        if isinstance(item, type) and issubclass(item, Enum):
            out += [m.value for m in item]
        elif isinstance(item, Enum) or item is None:
            out.append(None if item is None else item.value)
        else:
            raise TypeError(f"statuses: expected Enums, their members or None, got {item!r}")
    return tuple(dict.fromkeys(out))


def _shown(value) -> str:
    """A value as written, and the Enum member it came from: ``'raises' (Reaction.RAISES)``."""
    if isinstance(value, Enum):
        return f"{value.value!r} ({type(value).__name__}.{value.name})"
    return repr(value)


@dataclass(frozen=True)
class SortedBy:
    """Rows of several sorts in one log, told apart by ``column`` (a datasheet row's
    ``stage``): ``sorts`` maps each of its values to that sort's status columns -> words."""

    column: str
    sorts: Mapping[str, Mapping[str, Words]]


@dataclass(frozen=True)
class RunKind:
    """One driver's run folders, declared once in ``ctcbench/<driver>/kind.py``.

    ``key``: the columns that name one row (a resumed run redoes no key it holds);
    ``floats``: columns whose ``"inf"``/``"nan"`` strings are floats again when read;
    ``exports``: the files the driver writes beside ``rows.jsonl``; ``context``:
    ``"module:function"`` that reads a folder of this kind into the context of its page's
    template, ``ctcbench/<name>/page.html.j2`` (``template``), ``function(run_dir, meta,
    link_base) -> dict``. ``statuses``: each status-like column (``status``, ``*_status``) of
    its rows -> the words it may hold (``Words``), or a ``SortedBy`` where rows of several
    sorts hold different ones; the store refuses any other (``check_row``). Default: none.
    """

    name: str
    row_format: int
    key: tuple[str, ...]
    floats: tuple[str, ...] = ()
    optional_key: tuple[str, ...] = ()  # key columns some rows lack (bench's beam: decoders')
    exports: tuple[str, ...] = ()
    context: str = ""
    # "module:function" hooks the table (ctcbench/drivers.py) calls, so it names no driver:
    # ``pair(before_rows, after_rows)``, a before/after table for two runs of the kind;
    # ``pages(run_dir)``, the names of pages of one part each (a datasheet's backends),
    # each made by ``context(..., only=name)``
    pair: str = ""
    pages: str = ""
    statuses: Mapping[str, Words] | SortedBy = field(default_factory=dict, hash=False)

    def __post_init__(self):
        for columns in self._declared().values():  # a bare string is refused here, once
            for spec in columns.values():
                words(spec)

    def _declared(self) -> dict:
        """sort (None without a ``SortedBy``) -> its status columns -> words."""
        s = self.statuses
        return dict(s.sorts) if isinstance(s, SortedBy) else {None: s}

    def check_row(self, row: dict) -> None:
        """ValueError unless each status-like column of ``row`` holds a word this kind
        declares for it, naming the kind, the column and the words declared."""
        kind, sort = f"the {self.name} run kind", ""
        columns = self._declared()
        if isinstance(self.statuses, SortedBy):
            by = self.statuses.column
            value = row.get(by)
            if not isinstance(value, str) or value not in columns:
                fail(f"{self.name} row: {by}", f"one of the {by}s {kind} declares statuses "
                     f"for ({', '.join(columns)})", _shown(value))
            columns, sort = columns[value], f" for {by} {value!r}"
        else:
            columns = columns[None]
        for column in [*columns, *(c for c in row if STATUS_LIKE.search(c) and c not in columns)]:
            if column not in columns:
                fail(f"{self.name} row: {column}", f"no {column} column ({kind} declares "
                     f"{', '.join(columns) or 'no status column'}{sort})", _shown(row[column]))
            allowed = words(columns[column])
            if row.get(column) not in allowed:
                fail(f"{self.name} row: {column}", f"one of the {column} words {kind} declares"
                     f"{sort} ({', '.join('null' if w is None else w for w in allowed)})",
                     _shown(row.get(column)))

    @property
    def template(self) -> str:
        """The page's template, beside the driver's code (the renderer looks in ``ctcbench/``)."""
        return f"{self.name}/page.html.j2"

    def page_context(self, run_dir: Path, meta: dict, link_base: Path, **only) -> dict:
        return _hook(self.context)(run_dir, meta, link_base, **only)

    def pair_rows(self, before: list[dict], after: list[dict]) -> list[dict] | None:
        return _hook(self.pair)(before, after) if self.pair else None

    def page_parts(self, run_dir: Path) -> list[str]:
        return list(_hook(self.pages)(run_dir)) if self.pages else []


def _hook(spec: str):
    module, _, function = spec.partition(":")
    return getattr(importlib.import_module(module), function)


def read_meta(run_dir: Path) -> dict | None:
    """``meta.json`` of a run folder, or None when it has none (a run killed before writing
    it); ValueError naming the file when it is not a JSON object."""
    path = Path(run_dir) / META
    if not path.is_file():
        return None
    meta = read_object(path)
    for key, kind, words in (("kind", str, "a string"), ("config", dict, "an object"),
                             ("environment", dict, "an object")):
        if key in meta and not isinstance(meta[key], kind):
            fail(f"{path}: {key}", words, json.dumps(meta[key])[:60])
    return meta


def read_object(path: Path, expected: str = "the JSON a ctcbench run writes",
                keys=()) -> dict:
    """A JSON file of a run folder that holds one object (``meta.json``, a training run's
    ``config.json``) with ``keys`` among its own; one ValueError naming the file when it is
    not text, not JSON, not an object or short of a key."""
    path = Path(path)
    data = parse_text(read_text(path, str(path)), str(path), "JSON", expected)
    if not isinstance(data, dict):
        words = {list: "list", str: "string", bool: "boolean", int: "number", float: "number"}
        got = "null" if data is None else f"{words[type(data)]} {json.dumps(data)[:60]}"
        raise ValueError(f"{path}: expected a JSON object, got {got}")
    missing = [k for k in keys if k not in data]
    if missing:
        fail(str(path), f"{expected} with keys {', '.join(keys)}", f"no {', '.join(missing)}")
    return data


def row_of(line: bytes) -> dict | None:
    """The row one line of a row log holds, or None when it holds no JSON object (torn,
    damaged, nested past what the parser reads)."""
    try:
        row = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    return row if isinstance(row, dict) else None


def read_bytes(path: Path) -> bytes:
    """A run folder file's bytes, or one ValueError naming it (a folder in its place, no
    permission)."""
    try:
        return Path(path).read_bytes()
    except OSError as exc:
        fail(str(path), "a readable file", exc.strerror or type(exc).__name__)


def _first_row(run_dir: Path) -> dict:
    path = Path(run_dir) / ROWS
    if not path.is_file():
        return {}
    for line in read_bytes(path).split(b"\n"):
        row = row_of(line)
        if row is not None:
            return row
    return {}


def recorded_kind(run_dir: Path, meta: dict | None, kinds) -> str | None:
    """The kind ``meta.json`` names; for a folder from before kinds were recorded, the one
    of ``kinds`` whose key columns its first row holds; None when nothing tells."""
    if meta and isinstance(meta.get("kind"), str):
        return meta["kind"]
    config = (meta or {}).get("config")
    if isinstance(config, dict) and isinstance(config.get("driver"), str):
        return config["driver"]
    row = _first_row(run_dir)
    found = [k.name for k in kinds if row and set(k.key) - set(k.optional_key) <= set(row)]
    return found[0] if len(found) == 1 else None


def identify(run_dir: Path, kinds: dict[str, RunKind], *, what: str = "RUN_DIR"
             ) -> tuple[RunKind, dict]:
    """(its kind, its meta.json or ``{}``) of the run folder ``run_dir``, or one ValueError
    naming the folder: not a folder, no run in it, a kind ``kinds`` does not hold, or rows
    of a newer format than that kind's ``row_format``."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise ValueError(f"{what}: expected a run folder, got {str(run_dir)!r} "
                         f"({'a file' if run_dir.exists() else 'no such folder'})")
    meta = read_meta(run_dir)
    name = recorded_kind(run_dir, meta, kinds.values())
    if name is None:
        raise ValueError(f"{what}: expected a ctcbench run folder (meta.json naming its kind, "
                         f"or rows.jsonl), got {str(run_dir)!r}, which holds neither")
    if name not in kinds:
        raise ValueError(f"{what}: expected a run of a kind this ctcbench knows "
                         f"({', '.join(kinds)}), got {str(run_dir)!r}, which holds a run of "
                         f"kind {name!r}")
    kind = kinds[name]
    check_format(run_dir, kind, meta, what=what)
    return kind, meta or {}


def check_format(run_dir: Path, kind: RunKind, meta: dict | None, *, what: str) -> None:
    """ValueError when the folder's rows are of a format this version does not read."""
    found = (meta or {}).get("row_format", 1)  # folders from before formats were recorded: 1
    if found != kind.row_format:
        newer = isinstance(found, int) and found > kind.row_format
        raise ValueError(f"{what}: expected {kind.name} rows of format {kind.row_format}, the "
                         f"one this ctcbench reads, got {str(run_dir)!r}, which holds format "
                         f"{found!r}"
                         + (" (the folder was written by a newer ctcbench)" if newer else ""))
