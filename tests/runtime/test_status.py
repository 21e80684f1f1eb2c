"""Row statuses: each run kind declares the words its rows may hold, from Enums declared where
each concept belongs, and the run store refuses any other as the row is written; the drivers,
run on small problems, write only declared words."""
from __future__ import annotations

import json
from dataclasses import replace
from enum import StrEnum
from pathlib import Path

import pytest
from click.testing import CliRunner

from conftest import registered_for_one_test
from ctcbench.cli import cli
from ctcbench.drivers import kinds
from ctcbench.runs.kinds import RunKind, SortedBy
from ctcbench.runs.store import open_run
from ctcbench.runtime.status import CHECKED, FAILING, ORDER, TIMED, TRANSIENT, Status

PLUGINS = {  # each fails in one known way, so its compare status is known in advance
    "missing-package": "misbehaving_backends:NeedsMissingPackage",  # skipped
    "segv-always": "misbehaving_backends:SegfaultAlways",  # crashed
    "segv-known": "misbehaving_backends:SegfaultAlwaysKnownOnTfBasic",  # known on tf_basic
    "merges-repeats": "wrong_backends:MergesRepeats",  # mismatch on a target with a repeat
    "raises": "misbehaving_backends:RaisesOnRequest",  # unsupported in float16
}


@pytest.fixture
def plugins(monkeypatch, register_backends):
    yield from registered_for_one_test(monkeypatch, register_backends, PLUGINS)


def log(folder: Path) -> list[dict]:
    path = folder / "rows.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def a_row(kind: RunKind, **fields) -> dict:
    """A row of ``kind`` with its key columns filled and ``fields`` on top."""
    return {**{k: "x" for k in kind.key}, **fields}


# -- the vocabulary of compare and bench rows ---------------------------------------------------
def test_the_groups_are_words_of_the_vocabulary_in_order():
    """Failures sort first; the groups are drawn from Status; rows hold the plain word."""
    assert ORDER[:len(FAILING)] == FAILING  # failures sort first
    assert set(TRANSIENT) <= set(FAILING) and set(CHECKED) == {*FAILING, Status.KNOWN, Status.OK}
    assert set(TIMED) == set(Status) - {Status.MISMATCH, Status.KNOWN}  # a timing checks nothing
    assert json.dumps({"status": Status.OK}) == '{"status": "ok"}'  # rows stay plain JSON


# -- the store refuses what a kind does not declare, at write time -----------------------------
REFUSED = [  # kind, a row, the message's end (the words declared, then what was given)
    ("compare", {"status": "okay"},
     "compare row: status: expected one of the status words the compare run kind declares "
     "(mismatch, crashed, timeout, error, known, unsupported, skipped, ok), got 'okay'"),
    ("bench", {"status": "mismatch"},  # a timing checks nothing, so nothing mismatches
     "bench row: status: expected one of the status words the bench run kind declares "
     "(ok, error, crashed, timeout, unsupported, skipped), got 'mismatch'"),
    ("atlas", {"status": "ok"},
     "atlas row: status: expected one of the status words the atlas run kind declares "
     "(reproduces, fixed, cannot try, gpu only, no case), got 'ok'"),
    ("atlas", {},
     "atlas row: status: expected one of the status words the atlas run kind declares "
     "(reproduces, fixed, cannot try, gpu only, no case), got None"),
    ("fuzz", {"status": "found"},
     "fuzz row: status: expected no status column (the fuzz run kind declares no status "
     "column), got 'found'"),
    ("convergence", {"final_status": "diverged"},
     "convergence row: final_status: expected no final_status column (the convergence run "
     "kind declares no status column), got 'diverged'"),
    ("compare", {"status": "ok", "past_status": "ok"},
     "compare row: past_status: expected no past_status column (the compare run kind "
     "declares status), got 'ok'"),
    ("datasheet", {"stage": "probe", "status": "found"},  # a limit's word on a probe
     "datasheet row: status: expected one of the status words the datasheet run kind "
     "declares for stage 'probe' (ok, wrong, invalid, refuses, crashes, hangs, out of "
     "memory), got 'found'"),
    ("datasheet", {"stage": "limit", "status": "found", "past_status": "raises"},
     "datasheet row: past_status: expected one of the past_status words the datasheet run "
     "kind declares for stage 'limit' (ok, wrong, invalid, refuses, crashes, hangs, out of "
     "memory, null), got 'raises'"),
    ("datasheet", {"stage": "determinism", "status": "raises"},  # robustness's word
     "datasheet row: status: expected one of the status words the datasheet run kind "
     "declares for stage 'determinism' (identical, differs, failed), got 'raises'"),
    ("datasheet", {"stage": "info", "status": "crashed"},
     "datasheet row: status: expected one of the status words the datasheet run kind "
     "declares for stage 'info' (ok, skipped), got 'crashed'"),
    ("datasheet", {"stage": "precision", "status": "ok"},
     "datasheet row: status: expected no status column (the datasheet run kind declares no "
     "status column for stage 'precision'), got 'ok'"),
    ("datasheet", {"stage": "warm-up", "status": "ok"},
     "datasheet row: stage: expected one of the stages the datasheet run kind declares "
     "statuses for (info, probe, confirm, limit, trial, precision, robustness, determinism, "
     "speed), got 'warm-up'"),
]


@pytest.mark.parametrize("kind, fields, message", REFUSED,
                         ids=[f"{k}-{'-'.join(map(str, f.values())) or 'none'}"
                              for k, f, _ in REFUSED])
def test_a_row_whose_status_its_kind_does_not_declare_is_refused_and_not_written(
        tmp_path, kind, fields, message):
    """The run store's log refuses the row with one error naming the kind, the column and the
    words declared; the log is as it was (the first, good row only)."""
    k = kinds()[kind]
    good = {"compare": {"status": Status.OK}, "bench": {"status": Status.SKIPPED},
            "atlas": {"status": "no case"}, "fuzz": {"found": False}, "convergence": {},
            "datasheet": {"stage": "info", "status": Status.SKIPPED}}[kind]
    with open_run(k, tmp_path / "run") as run:
        run.log.append(a_row(k, **good))
        with pytest.raises(ValueError) as info:
            run.log.append(a_row(k, **fields))
    assert str(info.value) == message
    assert log(tmp_path / "run") == [a_row(k, **good)]


ACCEPTED = [  # the same words where their kind, or stage, declares them
    ("compare", {"status": Status.KNOWN}), ("bench", {"status": "unsupported"}),
    ("atlas", {"status": "cannot try"}), ("fuzz", {"found": True, "error": "a glitch"}),
    ("datasheet", {"stage": "limit", "status": "found", "past_status": "wrong"}),
    ("datasheet", {"stage": "limit", "status": "not searched", "past_status": None}),
    ("datasheet", {"stage": "robustness", "status": "raises"}),
    ("datasheet", {"stage": "speed", "status": "timeout"}),
    ("datasheet", {"stage": "precision", "tried": 3}),
]


@pytest.mark.parametrize("kind, fields", ACCEPTED)
def test_a_word_its_kind_declares_is_written(tmp_path, kind, fields):
    """The same check lets a declared word through, as the plain word."""
    k = kinds()[kind]
    with open_run(k, tmp_path / "run") as run:
        run.log.append(a_row(k, **fields))
    assert log(tmp_path / "run") == [json.loads(json.dumps(a_row(k, **fields)))]


def test_a_kind_declares_its_words_as_enums_never_bare_strings():
    """A vocabulary of string literals is refused where the kind is declared, so a new literal
    cannot stand in for an Enum; Enums, their members and None are taken."""
    class Word(StrEnum):
        ONE = "one"
        TWO = "two"
    with pytest.raises(TypeError, match=r"statuses: expected Enums, their members or None, "
                                        r"got 'three'"):
        RunKind("toy", row_format=1, key=("k",), statuses={"status": (Word, "three")})
    with pytest.raises(TypeError, match="got 'ok'"):
        RunKind("toy", row_format=1, key=("k",),
                statuses=SortedBy("stage", {"a": {"status": ("ok",)}}))
    toy = RunKind("toy", row_format=1, key=("k",), statuses={"status": (Word.ONE, None)})
    toy.check_row({"k": 1, "status": "one"})
    toy.check_row({"k": 1, "status": None})
    with pytest.raises(ValueError, match=r"expected one of the status words the toy run kind "
                                         r"declares \(one, null\), got 'two' \(Word.TWO\)"):
        toy.check_row({"k": 1, "status": Word.TWO})


# -- what the drivers write is declared --------------------------------------------------------
def invoke(*args):
    """The command to its end: exit 1 is a failing row, never an error (a refused row is one)."""
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code in (0, 1) and "Error:" not in res.stderr, res.output
    return res


def test_compare_writes_each_of_its_words_and_the_store_takes_them(tmp_path, plugins):
    """Backends planted to be skipped, crash, crash as a known issue, be wrong and decline a
    dtype give compare's rows those words, which its kind declares."""
    out = tmp_path / "run"
    invoke("compare", "--no-plot", "--backend", ",".join(["numpy", *PLUGINS]), "--case",
           "tf_basic", "--case", "alignment/single_alignment_repeats", "--dtype", "float16",
           "--dtype", "float64", "--out", str(out))
    got = {(r["backend"], r["status"]) for r in log(out)}
    assert {("numpy", "ok"), ("missing-package", "skipped"), ("segv-always", "crashed"),
            ("segv-known", "known"), ("merges-repeats", "mismatch"),
            ("raises", "unsupported")} <= got, got
    # the check can fail: a kind declaring fewer words refuses these very rows
    narrow = replace(kinds()["compare"], statuses={"status": (Status.OK, Status.SKIPPED)})
    with pytest.raises(ValueError, match=r"compare row: status: expected one of the status "
                                         r"words the compare run kind declares \(ok, skipped\)"):
        for row in log(out):
            narrow.check_row(row)


def test_bench_writes_its_words_and_the_store_takes_them(tmp_path, plugins):
    """A bench of a backend that runs and one that cannot run here."""
    grid = tmp_path / "grid.json"
    grid.write_text(json.dumps([{"T": 6, "N": 1, "C": 3, "L": 2}]))
    out = tmp_path / "run"
    invoke("bench", "--grid", str(grid), "--repeat", "1", "--warmup", "0",
           "--backend", "numpy,missing-package", "--out", str(out))
    got = {(r["backend"], r["status"]) for r in log(out)}
    assert {("numpy", "ok"), ("missing-package", "skipped")} <= got, got


@pytest.mark.long
def test_the_datasheet_writes_each_stage_s_words_and_the_store_takes_them(tmp_path):
    """numpy's datasheet, every stage but speed, on a small budget: a row of each stage, each
    with a word of its stage's vocabulary."""
    out = tmp_path / "run"
    invoke("datasheet", "--backend", "numpy", "--stages", "limits,precision,robustness,"
           "determinism", "--axes", "T", "--budget", "2", "--trials", "3", "--out", str(out))
    rows = log(out)
    stages = {r["stage"] for r in rows}
    assert {"info", "probe", "limit", "trial", "precision", "robustness",
            "determinism"} <= stages, stages
    by = {r["stage"]: r.get("status") for r in rows}
    assert by["info"] == "ok" and by["determinism"] == "identical"
    assert by["limit"] in ("found", "not reached")


def test_atlas_writes_its_words_and_the_store_takes_them(tmp_path):
    """The atlas with one backend asked for: every other entry is a word of its own."""
    out = tmp_path / "run"
    invoke("atlas", "--backend", "numpy", "--out", str(out))
    got = {r["status"] for r in log(out)}
    assert {"cannot try", "gpu only"} <= got, got


def test_fuzz_rows_hold_no_status_column(tmp_path):
    """fuzz declares no status column, and its search rows hold none."""
    out = tmp_path / "run"
    invoke("fuzz", "--backend", "numpy", "--against", "numpy", "--budget", "1", "--out", str(out))
    [row] = log(out)
    assert row["found"] is False and not [c for c in row if c.endswith("status")]
