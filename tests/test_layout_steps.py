"""docs/layout.md's "Adding things", followed as written: in a copy of the tree, a throwaway
backend, decoder, case and driver are added by touching exactly the files each recipe names;
the copy is laid out as a regular install lays it out; then the throwaways run, and the
suite's layout checks pass there. A recipe that misses a file, or needs more than it says,
fails here."""
from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NAME = "mine"  # the placeholder every recipe uses

# What a user would write for each recipe, by the path the recipe names ({} is NAME).
BACKEND = '''"""A throwaway backend: the float64 reference under another name."""
from ctcbench.backends.numpy_ref import NumpyBackend


class MineBackend(NumpyBackend):
    pass
'''
BACKEND_TEST = '''import numpy as np

from ctcbench import CTCProblem
from ctcbench.core.oracles import brute_force
from ctcbench.runtime.registry import get_backend


def test_mine_gives_the_brute_force_loss():
    rng = np.random.default_rng(0)
    logits = rng.normal(size=(4, 1, 3))
    problem = CTCProblem(logits, np.array([[1, 2]]), np.array([4]), np.array([2]))
    result = get_backend("mine").run(problem)
    loss, grad = brute_force(logits[:, 0], [1, 2])
    assert np.isclose(result.loss[0], loss) and np.allclose(result.grad_logits[:, 0], grad)
'''
DECODER = '''"""A throwaway decoder: ctcbench's greedy under another name."""
from ctcbench.backends.decoders.own import GreedyDecoder


class MineDecoder(GreedyDecoder):
    pass
'''
DECODER_TEST = '''import numpy as np

from ctcbench.runtime.decoders import get_decoder


def test_mine_collapses_the_best_path():
    frames = [1, 1, 0, 2, 2, 0, 2]  # the argmax of each frame: collapses to 1 2 2
    log_probs = np.log(np.full((len(frames), 1, 3), 0.1))
    for t, k in enumerate(frames):
        log_probs[t, 0, k] = np.log(0.8)
    [[best, *_]] = get_decoder("mine").decode(log_probs, np.array([len(frames)]), blank=0)
    assert best.labels == (1, 2, 2)
'''
CASE = '''# A throwaway case: uniform predictions, whose loss has a closed form.
[[case]]
name = "mine_uniform"
description = "T=6, C=4, target of 2 labels, uniform predictions"
provenance = "closed form (ctcbench.core.oracles.uniform_loss)"
[case.build]
generator = "uniform"
seed = 1
C = 4
[[case.build.sample]]
L = 2
T = 6
[case.expect]
oracle = "uniform"
'''
DRIVER_INIT = '"""``ctcbench mine``: a throwaway driver, squares of the first --count numbers."""\n'
DRIVER_KIND = '''from ctcbench.runs.kinds import RunKind

KIND = RunKind("mine", row_format=1, key=("n",), exports=("report.html",))
'''
DRIVER_RUN = '''import pandas as pd

from ctcbench.mine.kind import KIND
from ctcbench.runs.store import RunResult, check_out, open_run


def mine(count: int, *, out=None, resume: bool = False) -> RunResult:
    check_out(KIND, out, resume=resume)
    with open_run(KIND, out, resume=resume) as run:
        run.write_meta({"driver": "mine", "count": count})
        done = {r["n"] for r in run.rows()}
        for n in range(count):
            if n not in done:
                run.log.append({"n": n, "square": n * n})
        rows = run.rows()
    return RunResult(run.run_dir, pd.DataFrame(rows), {"rows": len(rows)}, run.environment)
'''
DRIVER_COMMAND = '''import click

from ctcbench.cli_options import out_options
from ctcbench.drivers import finish_run


@click.command()
@click.option("--count", type=click.IntRange(min=0), default=3, show_default=True,
              help="How many numbers to square.")
@out_options("mine")
def mine(count, out, resume):
    """Square the first --count numbers (a throwaway driver)."""
    from ctcbench.mine.run import mine as run_mine
    result = finish_run(run_mine(count, out=out, resume=resume))
    click.echo(f"{len(result.rows)} rows")


COMMANDS = (mine,)
'''
DRIVER_TEST = '''import json

from click.testing import CliRunner

from ctcbench.cli import main


def test_mine_writes_its_rows_and_a_page(tmp_path):
    out = tmp_path / "run"
    result = CliRunner().invoke(main, ["mine", "--count", "4", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
    assert [(r["n"], r["square"]) for r in rows] == [(n, n * n) for n in range(4)]
    assert "<td>9</td>" in (out / "report.html").read_text()
'''

WRITES = {  # recipe -> path the recipe names -> what is written there (None: appended line)
    "backend": {"backends/{}.py": BACKEND, "tests/backends/test_{}_backend.py": BACKEND_TEST,
                "ctcbench/runtime/registry.py": ("BUILTIN_BACKENDS",
                                                 '"{0}": "ctcbench.backends.{0}:MineBackend"')},
    "decoder or aligner": {
        "backends/decoders/{}.py": DECODER, "tests/decoding/test_{}_decoder.py": DECODER_TEST,
        "ctcbench/runtime/decoders.py": ("BUILTIN_DECODERS",
                                         '"{0}": "ctcbench.backends.decoders.{0}:MineDecoder"')},
    "case": {"cases/{}.toml": CASE},
    "driver": {"ctcbench/{}/__init__.py": DRIVER_INIT, "ctcbench/{}/kind.py": DRIVER_KIND,
               "ctcbench/{}/run.py": DRIVER_RUN, "ctcbench/{}/command.py": DRIVER_COMMAND,
               "tests/{0}/test_{0}.py": DRIVER_TEST, "docs/cli.md": "regenerate"},
}


def recipes() -> dict[str, tuple[int | None, list[str]]]:
    """docs/layout.md's recipes: what each adds -> (the number of files it says, the files
    its numbered steps name first, NAME written as {0})."""
    text = (ROOT / "docs" / "layout.md").read_text().split("## Adding things", 1)[1]
    text = text.split("\n## ", 1)[0]
    found = {}
    for item in re.split(r"\n- A \*\*", text)[1:]:
        what = item.split("**", 1)[0]
        count = re.search(r"(\d+) files?\b", item.split("\n", 1)[0] + item[:200])
        paths = [p.replace(NAME, "{0}") for p in
                 re.findall(r"^\s+\d+\. `([^`]+)`", item, flags=re.M)]
        found[what] = (int(count.group(1)) if count else None, paths)
    return found


def test_the_recipes_name_the_files_this_test_writes_and_keep_their_limits():
    found = recipes()
    limits = {"backend": 3, "decoder or aligner": 3, "driver": 6}
    for what, writes in WRITES.items():
        count, paths = found[what]
        if what == "case":  # one [[case]] in a file under cases/: no numbered steps
            assert count is None or count == 1
            continue
        assert sorted(p.format(NAME) for p in paths) == sorted(p.format(NAME) for p in writes), \
            (what, paths)
        assert count == len(paths) <= limits[what], (what, count, paths)


def test_the_recipe_check_can_fail():
    assert recipes()["driver"][1] != ["ctcbench/{0}/kind.py"]  # parsed, not a fixed answer


def _snapshot(tree: Path) -> dict[str, str]:
    return {p.relative_to(tree).as_posix(): hashlib.sha1(p.read_bytes()).hexdigest()
            for p in tree.rglob("*") if p.is_file() and "__pycache__" not in p.parts}


def _installed_form(tree: Path, site: Path) -> None:
    """The package as a regular install lays it out, by pyproject's ``package-dir``."""
    mapping = tomllib.loads((tree / "pyproject.toml").read_text())["tool"]["setuptools"][
        "package-dir"]
    for package, folder in sorted(mapping.items()):
        shutil.copytree(tree / folder, site.joinpath(*package.split(".")), dirs_exist_ok=True,
                        ignore=shutil.ignore_patterns("__pycache__"))


def _run(args, tree: Path, env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, *args], cwd=tree, env=env, capture_output=True,
                          text=True, timeout=900)


@pytest.mark.long
def test_throwaways_added_by_the_recipes_run_and_pass_the_layout_checks(tmp_path):
    tree, site = tmp_path / "tree", tmp_path / "site"
    listed = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, text=True, check=True).stdout.split("\n")
    for name in filter(None, listed):
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    before = _snapshot(tree)
    for what, writes in WRITES.items():
        for path, text in writes.items():
            if text == "regenerate":
                continue
            target = tree / path.format(NAME)
            if isinstance(text, tuple):  # one line in a table: after the table's opening line
                table, line = text
                source = target.read_text()
                opening = re.search(rf"^{table}\b.*{{\n", source, flags=re.M)
                assert opening, f"{path}: no {table} table"
                target.write_text(source[:opening.end()] + f"    {line.format(NAME)},\n"
                                  + source[opening.end():])
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(text)
    _installed_form(tree, site)
    env = {**os.environ, "PYTHONPATH": str(site), "PYTHONSAFEPATH": "1"}
    docs = _run(["-m", "ctcbench.cli_docs"], tree, env)
    assert docs.returncode == 0, docs.stderr
    (tree / "docs" / "cli.md").write_text(docs.stdout)
    changed = {p for p, h in _snapshot(tree).items() if before.get(p) != h}
    named = {p.format(NAME) for writes in WRITES.values() for p in writes}
    assert changed == named, sorted(changed ^ named)

    where = _run(["-c", "import ctcbench; print(ctcbench.__file__)"], tree, env)
    assert where.stdout.strip().startswith(str(site)), where
    compare = _run(["-m", "ctcbench", "compare", "--backend", NAME, "--case", f"*/{NAME}_*",
                    "--out", str(tmp_path / "compare"), "--no-plot"], tree, env)
    assert compare.returncode == 0 and f"{NAME}_uniform" in compare.stdout, \
        compare.stdout + compare.stderr
    checks = _run(["-m", "pytest", "-q", "-p", "no:cacheprovider",
                   "tests/test_layers.py", "tests/test_layout_doc.py", "tests/test_vocabulary.py",
                   "tests/runs/test_kinds.py", "tests/test_docs.py", "tests/test_packaging.py",
                   f"tests/backends/test_{NAME}_backend.py", f"tests/decoding/test_{NAME}_decoder.py",
                   f"tests/{NAME}/test_{NAME}.py"], tree, env)
    assert checks.returncode == 0, checks.stdout[-4000:] + checks.stderr[-2000:]
