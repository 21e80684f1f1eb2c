"""Run folders of every kind, made once by a real small run, then truncated or corrupted at
any byte or in any field, for ``ctcbench report`` and ``--resume``: a result or one line
naming the folder or file, never a traceback; a refused resume leaves the folder as it was,
an accepted one leaves it readable; a corrupted row is said with its file and line."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from hypothesis import given, strategies as st

from ctcbench.drivers import DRIVERS
from selffuzz.strategies_cli import check, fuzz_settings, run_cli

BOUND_S = 120  # a resumed small run redoes a few rows; past this it is a hang


def recipes(place: Path) -> dict[str, list[str]]:
    """The small run of each kind (seconds each): its command without ``--out``."""
    (place / "grid.json").write_text('[{"T": 12, "N": 2, "C": 4, "L": 3}]')
    return {
        "compare": ["compare", "--backend", "numpy", "--case", "published/tf_basic",
                    "--case", "alignment/*", "--no-plot"],
        "bench": ["bench", "--grid", place / "grid.json", "--backend", "numpy", "--repeat", "1"],
        "fuzz": ["fuzz", "--backend", "numpy", "--against", "numpy", "--budget", "1"],
        "datasheet": ["datasheet", "--backend", "numpy", "--stages", "determinism"],
        "atlas": ["atlas", "--backend", "numpy"],
        "convergence": ["convergence", "--steps", "2", "--eval-every", "1", "--batch-size", "4",
                        "--channels", "4", "--hidden", "8", "--train-size", "16", "--test-size",
                        "4", "--min-len", "1", "--max-len", "3", "--jobs", "1", "--cache-dir",
                        place / "cache"],
    }


SLOW = ("bench", "convergence")  # their small runs take 5-10 s on 2 shared cores: long only
KINDS = [pytest.param(k, marks=pytest.mark.long) if k in SLOW else k for k in DRIVERS]


@pytest.fixture(scope="session")
def made(tmp_path_factory):
    """kind -> (its finished run folder, its command), each made on first use."""
    place = tmp_path_factory.mktemp("runs")
    table, done = recipes(place), {}

    def get(kind: str):
        if kind not in done:
            out = place / kind
            res = run_cli([*table[kind], "--out", out], BOUND_S)
            assert res.exit_code == 0 and res.exception is None, res.output
            done[kind] = (out, table[kind])
        return done[kind]
    return get


def test_every_run_kind_has_a_small_run(tmp_path):
    """Each kind the drivers declare has a recipe here, so a new kind is fuzzed too."""
    assert set(recipes(tmp_path)) == set(DRIVERS)


def files_of(folder: Path) -> list[str]:
    """What a reader of the folder reads: every file but the page and plots it writes."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file()
                  and p.suffix not in (".html", ".png") and p.name != "run.lock")


CUTS = st.sampled_from(["truncate", "byte", "insert", "delete", "field", "line"])
JUNK = st.sampled_from([b"\x00", b"\xff\xfe", b"{", b'"', b"\n", b",", b"9", b"]", b"\n{\n",
                        "é".encode(), b"\r\n", b"NaN"])
FIELD_VALUES = st.sampled_from([None, "abc", -1, 1e308, [], {}, True, "nan", "x" * 500, 2**70,
                                {"a": [1]}, ""])


@st.composite
def corruption(draw, folder: Path):
    """(file, what was done, the new bytes or None for a deleted file) of one corrupted file."""
    name = draw(st.sampled_from(files_of(folder)), label="file")
    data = (folder / name).read_bytes()
    how = draw(CUTS, label="how")
    at = draw(st.integers(0, len(data)), label="at")
    if how == "truncate":
        return name, f"truncated at byte {at}", data[:at]
    if how == "byte" and data:
        at = min(at, len(data) - 1)
        return name, f"byte {at} set", data[:at] + draw(JUNK)[:1] + data[at + 1:]
    if how == "insert":
        return name, f"junk at byte {at}", data[:at] + draw(JUNK) + data[at:]
    if how == "delete":
        return name, "deleted", None
    if how == "line":
        lines = data.split(b"\n")
        k = draw(st.integers(0, len(lines)), label="line")
        return name, f"junk line {k + 1}", b"\n".join([*lines[:k], draw(JUNK), *lines[k:]])
    try:  # a JSON field of another type or value
        docs = [json.loads(line) for line in data.splitlines() if line.strip()] \
            if name.endswith(".jsonl") else [json.loads(data)]
    except (ValueError, UnicodeDecodeError):
        return name, "truncated at byte 0", b""
    doc = draw(st.sampled_from(docs), label="row")
    if not isinstance(doc, dict) or not doc:
        return name, "truncated at byte 0", b""
    key = draw(st.sampled_from(sorted(doc)), label="field")
    doc[key] = draw(FIELD_VALUES, label="value")
    text = "\n".join(json.dumps(d) for d in docs) + "\n" if name.endswith(".jsonl") \
        else json.dumps(docs[0])
    return name, f"field {key!r} = {doc[key]!r:.40}", text.encode()


def corrupted_copy(folder: Path, tmp: Path, change) -> Path:
    name, _, data = change
    copy = tmp / f"run-{len(list(tmp.iterdir()))}"
    shutil.copytree(folder, copy)
    for page in ("report.html",):
        (copy / page).unlink(missing_ok=True)
    if data is None:
        (copy / name).unlink()
    else:
        (copy / name).write_bytes(data)
    return copy


def snapshot(folder: Path) -> dict:
    return {p: (folder / p).read_bytes() for p in files_of(folder)}


@fuzz_settings(quick=3)
@given(data=st.data())
@pytest.mark.parametrize("kind", KINDS)
def test_report_of_a_corrupted_folder_is_a_page_or_one_line(kind, made, tmp_path_factory, data,
                                                           oracle):
    """``ctcbench report`` of a folder with one file corrupted: its page, or one line that
    names the folder or the file."""
    folder, _ = made(kind)
    change = data.draw(corruption(folder), label="change")
    copy = corrupted_copy(folder, tmp_path_factory.mktemp("report"), change)
    out = run_cli(["report", copy, "--out", copy / "report.html"], BOUND_S)
    check(out, oracle, f"runs: report {kind}", names=(str(copy), copy.name, change[0]))
    if change[0] == "rows.jsonl" and out.exit_code == 0 and change[1].startswith(("byte", "junk")):
        _said_with_line(copy, out)


def _said_with_line(copy: Path, out) -> None:
    """A row the log cannot read is said with the file and line (a torn end, with no
    newline, is what a killed run leaves: a resume cuts it off)."""
    lines = (copy / "rows.jsonl").read_bytes().split(b"\n")[:-1]  # each ended by a newline
    bad = [i + 1 for i, line in enumerate(lines) if line.strip() and not _is_row(line)]
    if bad:
        assert f"rows.jsonl line {bad[0]}" in out.output, (out.args, out.output[-1500:])


def _is_row(line: bytes) -> bool:
    try:
        return isinstance(json.loads(line.decode("utf-8")), dict)
    except (ValueError, UnicodeDecodeError):
        return False


@fuzz_settings(quick=1)
@given(data=st.data())
@pytest.mark.parametrize("kind", KINDS)
def test_resume_of_a_corrupted_folder_continues_or_leaves_it_as_it_was(kind, made,
                                                                      tmp_path_factory, data,
                                                                      oracle):
    """``--resume`` on a folder with one file corrupted: it continues (and the folder's page
    can be written after), or it refuses in one line naming the folder or file and changes
    nothing in it."""
    folder, command = made(kind)
    change = data.draw(corruption(folder), label="change")
    copy = corrupted_copy(folder, tmp_path_factory.mktemp("resume"), change)
    before = snapshot(copy)
    out = run_cli([*command, "--out", copy, "--resume"], BOUND_S)
    line = check(out, oracle, f"runs: resume {kind}", names=(str(copy), copy.name, change[0]))
    if line:
        assert snapshot(copy) == before, f"{change}: a refused resume changed the folder"
        assert not (copy / "run.lock").exists(), f"{change}: a refused resume left its lock"
        return
    again = run_cli(["report", copy, "--out", copy / "again.html"], BOUND_S)
    assert again.exit_code == 0, (change, again.output[-1500:])


# -- what the fuzz found, kept ----------------------------------------------------------------
REGRESSIONS = [  # (file, its new bytes, fragments of the Error: line or of the output)
    ("meta.json", b"", "meta.json: expected the JSON a ctcbench run writes, got a parse error"),
    ("meta.json", b"[" * 100_000, "meta.json: expected the JSON a ctcbench run writes, got "
                                  "lists or tables nested too deep"),  # was a RecursionError
    ("rows.jsonl", b'{"id": 1}\nnot a row\n', "rows.jsonl line 2: skipped (not a JSON row)"),
    ("rows.jsonl", b"[" * 100_000 + b"\n", "rows.jsonl line 1: skipped"),  # a RecursionError
    ("meta.json", b"null", "meta.json: expected a JSON object, got null"),  # was "NoneType"
    ("meta.json", b'{"kind": "atlas", "row_format": 1, "config": -1}',  # an AttributeError
     "meta.json: config: expected an object, got -1"),
]


@pytest.mark.parametrize("name, data, words", REGRESSIONS)
def test_found_by_the_fuzz_and_fixed(name, data, words, made, tmp_path, oracle):
    """Damage the fuzz found answered with a library's words, a traceback or silence (a
    row skipped unsaid), now said in one line naming the file (and line)."""
    folder, _ = made("atlas")
    copy = corrupted_copy(folder, tmp_path, (name, "", data))
    out = run_cli(["report", copy, "--out", copy / "report.html"], BOUND_S)
    check(out, oracle, "runs: regressions", names=(name,))
    assert words in out.output, out.output[-1500:]


def test_a_row_log_that_is_a_folder_is_one_line(made, tmp_path, oracle):
    """rows.jsonl replaced by a folder: one line naming it, not Python's ``[Errno 21]``."""
    folder, command = made("atlas")
    copy = corrupted_copy(folder, tmp_path, ("rows.jsonl", "", None))
    (copy / "rows.jsonl").mkdir()
    for argv in (["report", copy, "--out", copy / "r.html"], [*command, "--out", copy, "--resume"]):
        line = check(run_cli(argv, BOUND_S), oracle, "runs: regressions", names=("rows.jsonl",))
        assert "rows.jsonl: expected a readable file, got" in line, line
        assert not (copy / "run.lock").exists(), "a refused run left its lock behind"


@pytest.mark.long
@pytest.mark.parametrize("name, data, words", [
    ("config.json", b"{", "config.json: expected a training run's config, got a parse error"),
    ("summary.json", b'{"a": 1}', "summary.json: expected a training run's summary with keys"),
    ("curve.jsonl", b"", "curve.jsonl: expected the curve of the finished run"),  # KeyError
    ("summary.json", None, "summary.json: final_cer: expected a number or null, got 'abc'"),
])
def test_a_training_runs_own_files_damaged_are_one_line(name, data, words, made, tmp_path,
                                                         oracle):
    """A convergence run's ``runs/<run>/config.json`` not JSON, its ``summary.json`` short of
    its keys, its curve emptied: one line naming the file (were json's bare words and bare
    KeyErrors); the page of an emptied curve is drawn from the summary alone."""
    folder, command = made("convergence")
    [inner] = [p.relative_to(folder) for p in folder.glob(f"runs/*/{name}")]
    if data is None:  # pandas' "dtype 'str' does not support operation 'median'"
        data = json.dumps({**json.loads((folder / inner).read_text()), "final_cer": "abc"})
        data = data.encode()
    copy = corrupted_copy(folder, tmp_path, (str(inner), "", data))
    for argv in (["report", copy, "--out", copy / "report.html"], [*command, "--out", copy,
                                                                      "--resume"]):
        line = check(run_cli(argv, BOUND_S), oracle, "runs: regressions", names=(name,))
        assert words in line or name == "curve.jsonl" and argv[0] == "report", line
