"""The convergence data cache: several real processes filling one cold folder, damaged, foreign and
stale entries rebuilt with a note, and unusable --cache-dir folders rejected with one clear error."""
import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.convergence.data import DataConfig, cache_path, load_pool, make_pool
from ctcbench.convergence.datacache import check_cache_dir

CFG = DataConfig(train_size=40, test_size=4, min_len=2, max_len=5)

# One process: signal ready, wait for the common start, load through the cache, save what it got.
FILL = """
import sys, time
from pathlib import Path
import numpy as np
from ctcbench.convergence.data import DataConfig, load_pool
cache, out, ready, go = sys.argv[1:5]
Path(ready).touch()
while not Path(go).exists():
    time.sleep(0.002)
pool = load_pool(DataConfig(**{cfg}), "train", cache_dir=cache)
np.savez(out, images=pool.images, labels=pool.labels, lengths=pool.lengths)
"""


def assert_same_pool(pool, fresh):
    np.testing.assert_array_equal(pool.images, fresh.images)
    np.testing.assert_array_equal(pool.labels, fresh.labels)
    np.testing.assert_array_equal(pool.lengths, fresh.lengths)


def test_four_processes_fill_one_cold_cache(tmp_path):
    """Four processes started together on a cold cache all succeed with the same arrays, equal to
    an in-memory build, and leave one entry (plus its lock) and no temporary files."""
    cache = tmp_path / "cache"
    script = FILL.format(cfg=asdict(CFG))
    procs = [subprocess.Popen([sys.executable, "-c", script, str(cache), str(tmp_path / f"out{i}.npz"),
                               str(tmp_path / f"ready{i}"), str(tmp_path / "go")],
                              stderr=subprocess.PIPE, text=True) for i in range(4)]
    deadline = time.monotonic() + 120
    while not all((tmp_path / f"ready{i}").exists() for i in range(4)):
        assert time.monotonic() < deadline and all(p.poll() is None for p in procs), \
            [p.stderr.read() for p in procs if p.poll() is not None]
        time.sleep(0.01)
    (tmp_path / "go").touch()
    errors = [p.communicate(timeout=120)[1] for p in procs]
    assert [p.returncode for p in procs] == [0] * 4, errors
    assert all("rebuilding" not in e for e in errors)  # a cold cache is built, not "rebuilt"
    fresh = make_pool(CFG, "train")
    for i in range(4):
        with np.load(tmp_path / f"out{i}.npz") as got:
            np.testing.assert_array_equal(got["images"], fresh.images)
            np.testing.assert_array_equal(got["labels"], fresh.labels)
            np.testing.assert_array_equal(got["lengths"], fresh.lengths)
    entry = cache_path(CFG, "train", cache)
    assert sorted(p.name for p in cache.iterdir()) == sorted([entry.name, entry.stem + ".lock"])


def test_truncated_entry_is_rebuilt_with_a_note(tmp_path, capfd):
    """A truncated entry is rebuilt (equal to an in-memory build) with one stderr line naming it."""
    load_pool(CFG, "train", cache_dir=tmp_path)
    entry = cache_path(CFG, "train", tmp_path)
    data = entry.read_bytes()
    entry.write_bytes(data[: len(data) // 2])
    capfd.readouterr()
    assert_same_pool(load_pool(CFG, "train", cache_dir=tmp_path), make_pool(CFG, "train"))
    note = capfd.readouterr().err.strip().splitlines()
    assert len(note) == 1 and note[0].startswith(f"data cache: rebuilding {entry} (damaged: ")
    assert entry.stat().st_size == len(data)  # the whole entry is back
    load_pool(CFG, "train", cache_dir=tmp_path)
    assert capfd.readouterr().err == ""  # and it is used as it is


def test_foreign_entry_is_rebuilt(tmp_path, capfd):
    """An entry built from another data config, found under this config's name, is rebuilt."""
    other = DataConfig(train_size=40, test_size=4, min_len=2, max_len=5, seed=7)
    load_pool(other, "train", cache_dir=tmp_path)
    entry = cache_path(CFG, "train", tmp_path)
    shutil.copy(cache_path(other, "train", tmp_path), entry)
    capfd.readouterr()
    assert_same_pool(load_pool(CFG, "train", cache_dir=tmp_path), make_pool(CFG, "train"))
    assert capfd.readouterr().err == (f"data cache: rebuilding {entry} "
                                      "(foreign: built from another data config)\n")


def test_stale_and_old_format_entries_are_rebuilt(tmp_path, capfd):
    """An entry made with another Pillow, or one with no record of its origin, is rebuilt."""
    entry = cache_path(CFG, "train", tmp_path)
    fresh = make_pool(CFG, "train")
    wrong = np.zeros_like(fresh.images)  # a rebuilt pool cannot come from this file
    load_pool(CFG, "train", cache_dir=tmp_path)
    with np.load(entry) as z:
        meta = json.loads(str(z["meta"]))
    meta["versions"]["Pillow"] = "0.1"
    np.savez(entry, meta=np.array(json.dumps(meta)), images=wrong, labels=fresh.labels,
             lengths=fresh.lengths)
    capfd.readouterr()
    assert_same_pool(load_pool(CFG, "train", cache_dir=tmp_path), fresh)
    err = capfd.readouterr().err
    assert err.startswith(f"data cache: rebuilding {entry} (stale: built with other library "
                          "versions: Pillow 0.1 -> ") and err.count("\n") == 1
    np.savez(entry, images=wrong, labels=fresh.labels, lengths=fresh.lengths,
             charset=np.array(CFG.charset))  # the format before entries recorded their origin
    assert_same_pool(load_pool(CFG, "train", cache_dir=tmp_path), fresh)
    assert capfd.readouterr().err == (f"data cache: rebuilding {entry} "
                                      "(no record of what it was built from)\n")


@pytest.mark.parametrize("below", ["", "sub/deeper"])
def test_file_in_the_way_is_a_clear_error(tmp_path, below):
    """--cache-dir that is, or lies below, a regular file: a ValueError naming the option and path."""
    blocker = tmp_path / "file"
    blocker.write_text("x")
    cache = blocker / below if below else blocker
    with pytest.raises(ValueError) as info:
        load_pool(CFG, "train", cache_dir=cache)
    assert str(info.value) == (f"--cache-dir: expected a folder, got {str(cache)!r} "
                               f"({str(blocker)!r} is a regular file)")


def test_cli_with_file_in_the_way_prints_one_line_and_writes_no_run(tmp_path):
    """`ctcbench convergence` with --cache-dir below a file: one error line, no run folder."""
    (tmp_path / "file").write_text("x")
    cache, out = tmp_path / "file" / "cache", tmp_path / "run"
    res = CliRunner().invoke(cli, ["convergence", "--train-size", "8", "--test-size", "2", "--steps", "1",
                                   "--out", str(out), "--cache-dir", str(cache)])
    assert res.exit_code == 1
    assert res.output.splitlines() == [f"Error: --cache-dir: expected a folder, got {str(cache)!r} "
                                       f"({str(tmp_path / 'file')!r} is a regular file)"]
    assert not out.exists()


def test_the_default_cache_dir_in_the_way_is_named_as_the_default(tmp_path, monkeypatch):
    """A user who never typed --cache-dir learns that the folder is its default, and how to
    pick another."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "reports").write_text("x")  # a file where the default folder would go
    res = CliRunner().invoke(cli, ["convergence", "--train-size", "8", "--test-size", "2",
                                   "--steps", "1", "--out", str(tmp_path / "run")])
    assert res.exit_code == 1
    assert res.output.splitlines() == [
        "Error: --cache-dir (its default reports/.data-cache; pass --cache-dir DIR for another): "
        "expected a folder, got 'reports/.data-cache' ('reports' is a regular file)"]


def _unprivileged(fn, *args):
    """Run ``fn(*args)`` in a forked child that has no root rights (root would write anywhere);
    returns the message of the exception it raised, or "no error"."""
    ctx = mp.get_context("fork")
    result = ctx.SimpleQueue()

    def child():
        if os.geteuid() == 0:
            os.setgid(65534)
            os.setuid(65534)  # nobody
        try:
            fn(*args)
            result.put("no error")
        except Exception as exc:  # noqa: BLE001 - the message is the result
            result.put(f"{type(exc).__name__}: {exc}")
    proc = ctx.Process(target=child)
    proc.start()
    proc.join(60)
    if proc.is_alive():
        proc.kill()
    return result.get() if not result.empty() else f"child ended with exit code {proc.exitcode}"


@pytest.fixture
def read_only_dir():
    """A folder nobody may write to, inside a folder everybody may enter."""
    top = Path(tempfile.mkdtemp())
    top.chmod(0o755)
    ro = top / "ro"
    ro.mkdir(mode=0o555)
    ro.chmod(0o555)
    yield ro
    ro.chmod(0o755)
    shutil.rmtree(top)


@pytest.mark.parametrize("below", ["", "sub"])
def test_read_only_folder_is_a_clear_error(read_only_dir, below):
    """A read-only --cache-dir (or one that would be made inside a read-only folder): a ValueError
    naming the option and the path, from the check and from load_pool alike."""
    cache = read_only_dir / below if below else read_only_dir
    expected = f"ValueError: --cache-dir: expected a writable folder, got {str(cache)!r} (Permission denied)"
    assert _unprivileged(check_cache_dir, cache) == expected
    assert _unprivileged(lambda: load_pool(CFG, "test", cache_dir=cache)) == expected
    assert list(read_only_dir.iterdir()) == []
