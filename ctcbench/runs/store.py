"""Run folders: one store, one set of rules, for every driver (compare, bench, convergence, fuzz).

A run folder holds
  meta.json    {"kind", "row_format", "config", "environment"}: which command wrote the
               folder, the version of its row format, the run's configuration and where it ran
  rows.jsonl   one JSON object per line, appended, flushed and fsync'ed as each row is
               finished, so an interrupted run keeps what it did
  run.lock     who is writing the folder now, while a run is (see ctcbench.runs.lock)
plus whatever tables and plots the driver exports.

The rules (``open_run``): without ``resume`` a folder that already holds a run is refused,
never deleted or merged into; with ``resume`` the run continues (a torn last row is dropped
with a note and the log truncated to its last good line); a folder of another kind, or of a
row format this version cannot read, is refused either way; a folder another process is
writing is refused naming that process.
"""
from __future__ import annotations

import datetime as _dt
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd

from ctcbench.environment import environment
from ctcbench.errors import fail
from ctcbench.files import atomic_write, to_json
from ctcbench.runs.kinds import (META, ROWS, RunKind, check_format, read_bytes, read_meta,
                                 recorded_kind, row_of)
from ctcbench.runs.lock import RunLock, check_free, describe_holder

DEFAULT_REPORTS = Path("reports")


@dataclass
class RunResult:
    """What every driver returns, to the CLI and to Python alike.

    ``rows``: one tidy row per key of the driver (compare: backend, case, dtype, device;
    bench: backend, size, dtype; convergence: one row per training run). ``summary``: the
    driver's verdict and counts. ``resumed``: rows kept from an earlier run of the folder.
    """

    run_dir: Path
    rows: pd.DataFrame
    summary: dict
    environment: dict
    resumed: int = 0
    files: list[Path] = field(default_factory=list)


_SAID: set = set()  # the unreadable lines said already by this process, said once each


def _say_skipped(path: Path, number: int, size: int) -> None:
    """A note on stderr, once, that line ``number`` of the log ``path`` holds no row."""
    if (str(path), number, size) not in _SAID:
        _SAID.add((str(path), number, size))
        print(f"note: {path} line {number}: skipped (not a JSON row); its row counts as not "
              f"done", file=sys.stderr)


class RowLog:
    """Append-only JSON-lines log of result rows; with a ``kind``, a run folder's log, which
    refuses a row whose status its kind does not declare (``RunKind.check_row``)."""

    def __init__(self, path: Path, kind: RunKind | None = None):
        self.path, self.kind = Path(path), kind

    def append(self, row: dict) -> None:
        """One line, flushed and fsync'ed: a row the log holds survives a kill or a crash.
        A row its kind refuses is a ValueError, and nothing is written."""
        if self.kind is not None:
            self.kind.check_row(row)
        with self.path.open("a", encoding="utf-8") as f:
            f.write(to_json(row) + "\n")
            f.flush()
            os.fsync(f.fileno())

    def rows(self, floats=()) -> list[dict]:
        """The rows written so far; in the fields named in ``floats``, the strings "inf",
        "-inf" and "nan" that ``to_json`` wrote are floats again, as in a fresh row."""
        if not self.path.exists():
            return []
        data = read_bytes(self.path)
        rows, lines = [], data.split(b"\n")
        for number, line in enumerate(lines, 1):
            if not line.strip():
                continue
            row = row_of(line)
            if row is None:  # a damaged line is said; a torn end is what a kill leaves
                if number < len(lines):
                    _say_skipped(self.path, number, len(data))
                continue
            for key in floats:
                if row.get(key) in ("inf", "-inf", "nan"):
                    row[key] = float(row[key])
            rows.append(row)
        return rows

    def repair(self) -> list[str]:
        """Drop lines that hold no row (a last line cut by a kill, with no newline or not
        JSON; a line an older version wrote a row onto); return one note per line dropped.
        A torn end is truncated away; bad lines inside are removed by rewriting the file."""
        if not self.path.exists():
            return []
        data = read_bytes(self.path)
        good, notes, cut, pos, inside = [], [], 0, 0, False
        for i, line in enumerate(data.split(b"\n")):
            complete = pos + len(line) < len(data)  # a newline ends it
            pos += len(line) + complete
            if not line.strip():
                continue
            if complete and row_of(line) is not None:
                good.append(line)
                inside, cut = inside or bool(notes), pos  # the file is sound up to ``cut``
                continue
            why = "not a JSON row" if complete else "no newline: cut by an interrupted write"
            notes.append(f"{self.path} line {i + 1}: dropped ({why}); its row counts as "
                         f"not done")
        if notes and not inside:  # a torn end only: cut it off
            with self.path.open("r+b") as f:
                f.truncate(cut)
                os.fsync(f.fileno())
        elif notes:
            atomic_write(self.path, b"".join(line + b"\n" for line in good))
        return notes


class RunFolder:
    """An open run folder: locked for this process, its kind checked, its log repaired.

    ``kind``: the driver's ``RunKind``; ``meta``: the meta.json found when opened (None for a
    new run); ``log``: its rows, each checked against the kind's statuses as it is written
    (rows a resumed folder already holds are read and kept as they are). Use as a context
    manager, or call ``close``.
    """

    def __init__(self, run_dir: Path, kind: RunKind, lock: RunLock, meta: dict | None):
        self.run_dir, self.kind, self.lock, self.meta = run_dir, kind, lock, meta
        self.log = RowLog(run_dir / ROWS, kind)
        self.environment: dict = {}

    def rows(self) -> list[dict]:
        """The rows written so far, with this kind's float columns as floats."""
        return self.log.rows(floats=self.kind.floats)

    def keep_rows(self, keep) -> list[dict]:
        """Rewrite the log with only the rows ``keep(row)`` accepts (atomically), so that each
        key a resumed run does again is in the log once; returns the rows kept."""
        rows = self.rows()
        kept = [r for r in rows if keep(r)]
        if len(kept) < len(rows):
            atomic_write(self.log.path, "".join(to_json(r) + "\n" for r in kept))
        return kept

    def write_meta(self, config: dict, extra_packages=()) -> dict:
        """meta.json: kind, row format, ``config`` and the environment; written atomically."""
        self.environment = environment(extra_packages)
        meta = {"kind": self.kind.name, "row_format": self.kind.row_format, "config": config,
                "environment": self.environment}
        atomic_write(self.run_dir / META, to_json(meta, indent=2) + "\n")
        self.meta = meta
        return meta

    def close(self) -> None:
        self.lock.release()

    def __enter__(self) -> "RunFolder":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _a(word: str) -> str:
    return f"{'an' if word[:1] in 'aeiou' else 'a'} {word}"


def run_folder_path(kind: str, out=None) -> Path:
    """``out``, or ``reports/<kind>-<UTC time>`` when it is ``None``; an empty ``out`` (the
    current folder to the OS) is refused."""
    if out is not None and not str(out).strip():
        fail("--out", "a folder path", repr(str(out)))
    if out is None:
        stamp = _dt.datetime.now(_dt.timezone.utc).strftime("%Y%m%d-%H%M%S")
        return DEFAULT_REPORTS / f"{kind}-{stamp}"
    return Path(out)


def resume_needs_out(out, resume: bool, folder: str = "run folder") -> None:
    """The one rule ``--resume`` has of its own: it continues the folder ``--out`` names."""
    if resume and out is None:
        fail("--resume", f"--out DIR, the {folder} to continue", "none")


def check_out(kind: RunKind, out=None, *, resume: bool = False, held: bool = False) -> Path:
    """The checks of ``open_run`` that need no lock, for drivers to call before any slow work
    (one line, nothing written): ``--resume`` needs ``--out``; a folder that holds a run is
    refused unless resumed, one of another kind, a newer format or in use by another process
    always (``held``: this process holds its lock, ``open_run`` checking again). Returns the
    path."""
    resume_needs_out(out, resume)
    path = run_folder_path(kind.name, out)
    if path.exists() and not path.is_dir():
        raise ValueError(f"--out: expected a folder, got {str(path)!r} (a file)")
    if resume and not path.is_dir():
        raise ValueError(f"--resume: expected an existing run folder, got {str(path)!r} "
                         f"(no such folder)")
    if not path.is_dir():
        return path
    meta = read_meta(path)
    has_run = meta is not None or bool(RowLog(path / ROWS).rows())
    found = recorded_kind(path, meta, [kind]) if has_run else None
    if has_run and found is None:
        raise ValueError(f"--out: expected a folder of {_a(kind.name)} run or none, got "
                         f"{str(path)!r}, which holds a run of unknown kind (meta.json names "
                         f"none); `ctcbench {kind.name}` will not write into it")
    if has_run and found != kind.name:
        raise ValueError(f"--out: expected a folder of {_a(kind.name)} run or none, got "
                         f"{str(path)!r}, which holds {_a(found)} run; `ctcbench {kind.name}` "
                         f"does not {'resume' if resume else 'write into'} {_a(found)} run "
                         f"folder")
    if has_run:
        check_format(path, kind, meta, what="--out")
        if not held:  # in use: said now, before the driver's slow work, not under the lock
            check_free(path)
    if has_run and not resume:
        raise ValueError(f"--out: expected a new or empty folder, got {str(path)!r}, which "
                         f"already holds {_a(found)} run; pass --resume to continue it, or "
                         f"choose another folder")
    if resume and not has_run:
        raise ValueError(f"--resume: expected a {kind.name} run folder to continue, got "
                         f"{str(path)!r} (no meta.json and no rows)")
    return path


def open_run(kind: RunKind, out=None, *, resume: bool = False,
             command: str | None = None) -> RunFolder:
    """Open the run folder ``out`` (default ``reports/<kind>-<UTC time>``) for a ``kind`` run.

    Without ``resume``: a new or empty folder; one that already holds a run is refused.
    With ``resume``: an existing folder holding a ``kind`` run, continued; its torn last row
    is dropped (a note on stderr). Either way a folder of another kind, of a newer row
    format, or in use by another process is refused (``check_out``, again under the lock).
    """
    path = check_out(kind, out, resume=resume)
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # no permission, a file in the way further up
        raise ValueError(f"--out: expected a folder that exists or can be created, got "
                         f"{str(path)!r} ({exc.strerror})") from None
    lock = RunLock(path, command=command).acquire()  # one writer; then check what is there
    try:
        check_out(kind, path, resume=resume, held=True)
        run = RunFolder(path, kind, lock, read_meta(path))
        notes = run.log.repair()  # a new run too: never append onto a torn line
    except BaseException:  # refused: the folder is left as it was, unlocked
        lock.release()
        raise
    if lock.taken_over:
        print(f"note: {path}: took over the lock of {describe_holder(lock.taken_over)}, "
              f"which ended without releasing it", file=sys.stderr)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    return run
