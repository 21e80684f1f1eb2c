"""Resume is lossless: a row log torn at any byte (what a kill mid-write leaves) and resumed
gives every key exactly once, with the values the same run gives uninterrupted (the oracle)."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli

COMPARE = ["compare", "--no-plot", "--backend", "numpy", "--backend", "torch",
           "--case", "alignment/*", "--case", "published/tf_basic"]
TIMES = ("time_s",)  # measured, so not equal between two runs


def invoke(*args):
    res = CliRunner().invoke(cli, list(args))
    assert res.exit_code in (0, 1), res.output
    return res


def rows(folder: Path) -> list[dict]:
    return [json.loads(line) for line in (folder / "rows.jsonl").read_text().splitlines()]


def tear_points(log: Path) -> list[int]:
    """Byte offsets to cut the log at: inside the first row, just after a newline, inside a
    middle row, one byte short of the end."""
    data = log.read_bytes()
    newlines = [i for i, b in enumerate(data) if b == ord("\n")]
    middle = newlines[len(newlines) // 2]
    return sorted({newlines[0] // 2, newlines[0] + 1, middle - 7, len(data) - 1})


def torn_copy(run: Path, at: int, tmp: Path) -> Path:
    """A copy of the finished run folder ``run`` whose row log ends at byte ``at``, without
    the exports a killed run would not have written yet."""
    copy = tmp / f"torn-{at}"
    shutil.copytree(run, copy)
    log = copy / "rows.jsonl"
    log.write_bytes(log.read_bytes()[:at])
    for name in ("report.html", "rows.csv", "rows.json", "bench.csv", "bench.json"):
        (copy / name).unlink(missing_ok=True)
    return copy


def by_key(rs: list[dict], key, ignore=()) -> dict:
    out = {}
    for r in rs:
        k = tuple(r.get(f) for f in key)
        assert k not in out, f"key {k} twice in the log"
        out[k] = {f: v for f, v in r.items() if f not in ignore}
    return out


@pytest.fixture(scope="module")
def compare_run(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("compare") / "whole"
    assert invoke(*COMPARE, "--out", str(out)).exit_code == 0
    return out


def test_compare_torn_anywhere_resumes_to_the_uninterrupted_rows(compare_run, tmp_path):
    from ctcbench.compare.kind import KEY
    whole = by_key(rows(compare_run), KEY, ignore=TIMES)
    for at in tear_points(compare_run / "rows.jsonl"):
        torn = torn_copy(compare_run, at, tmp_path)
        res = invoke(*COMPARE, "--out", str(torn), "--resume")
        assert res.exit_code == 0, (at, res.output)
        assert by_key(rows(torn), KEY, ignore=TIMES) == whole, at
        assert (torn / "report.html").is_file()


def test_compare_resume_redoes_a_row_that_errored_in_place(compare_run, tmp_path):
    """A row whose status may be transient (error) is run again on resume and the log keeps
    only the new row for its key."""
    from ctcbench.compare.kind import KEY
    copy = tmp_path / "errored"
    shutil.copytree(compare_run, copy)
    rs = rows(copy)
    rs[0] = {**rs[0], "status": "error", "reason": "RuntimeError: a passing glitch"}
    (copy / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rs))
    assert invoke(*COMPARE, "--out", str(copy), "--resume").exit_code == 0
    assert by_key(rows(copy), KEY, ignore=TIMES) == by_key(rows(compare_run), KEY, ignore=TIMES)


@pytest.fixture(scope="module")
def bench_args(tmp_path_factory) -> list[str]:
    grid = tmp_path_factory.mktemp("grid") / "grid.json"
    grid.write_text(json.dumps([{"T": 10 + 5 * i, "N": 2, "C": 4, "L": 3} for i in range(4)]))
    return ["bench", "--grid", str(grid), "--backend", "numpy", "--repeat", "1", "--format", "json"]


@pytest.mark.long
def test_bench_torn_anywhere_resumes_to_one_row_per_key(bench_args, tmp_path):
    """Every (backend, size) exactly once after resume, whichever byte the log was cut at;
    a size whose rows were cut is measured again for every backend (the ratio to torch is
    measured interleaved), the whole sizes are kept as they were."""
    from ctcbench.bench.kind import KEY
    whole_dir = tmp_path / "whole"
    assert invoke(*bench_args, "--out", str(whole_dir)).exit_code == 0
    described = ("backend", "threads", "T", "N", "C", "L", "cells", "dtype", "repeat", "status",
                 "reason")  # the rest are measured, so not equal between two runs
    whole = rows(whole_dir)
    keys = set(by_key(whole, KEY))
    assert len(keys) == 8  # 4 sizes x (numpy, torch)
    for at in tear_points(whole_dir / "rows.jsonl"):
        torn = torn_copy(whole_dir, at, tmp_path)
        before = by_key([json.loads(line) for line in (torn / "rows.jsonl").read_bytes()
                         .splitlines(keepends=True) if line.endswith(b"\n")], KEY)
        res = invoke(*bench_args, "--out", str(torn), "--resume")
        assert res.exit_code == 0, (at, res.output)
        after = by_key(rows(torn), KEY)
        assert set(after) == keys, at
        strip = lambda d: {k: {f: r.get(f) for f in described}  # noqa: E731
                           for k, r in d.items()}
        assert strip(after) == strip(by_key(whole, KEY)), at
        sizes_whole = {k[1:] for k in before if all((b, *k[1:]) in before for b in ("numpy", "torch"))}
        for k, r in before.items():  # a size all of whose rows survived is not measured again
            if k[1:] in sizes_whole:
                assert after[k] == r, (at, k)


@pytest.mark.long
def test_fuzz_torn_resumes_to_one_row_per_search(tmp_path):
    """Two searches in a folder, the log cut inside the second: resumed, the folder holds
    searches 1 and 2 once each."""
    out = tmp_path / "fuzz"
    args = ["fuzz", "--backend", "numpy", "--against", "numpy", "--budget", "1", "--out", str(out)]
    assert invoke(*args).exit_code == 0
    assert invoke(*args, "--resume").exit_code == 0
    log = out / "rows.jsonl"
    assert [r["search"] for r in rows(out)] == [1, 2]
    for at in tear_points(log)[1:]:  # from just after the first row on
        torn = torn_copy(out, at, tmp_path)
        assert invoke(*args[:-1], str(torn), "--resume").exit_code == 0, at
        assert [r["search"] for r in rows(torn)] == [1, 2], at
