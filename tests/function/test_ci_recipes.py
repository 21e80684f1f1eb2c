"""docs/ci.md's recipes, run as written on a scratch project, the install line included: into a
fresh environment, with a wheel built from this tree in place of the released `ctcbench`. A CTC
binding with its known issues passes every step; the same binding with a planted bug (it drops
the blank argument) fails the compare and the pytest step on a case whose blank is not 0. The
oracle is the case library's known answers, which the recipe's commands check.

CI runs it in its wheel job (.ci/wheel-job): there the fresh environment is the one running
this test, which holds the recipe's own packages (torch, the wheel that job built, pytest) and
nothing else, and `CTCBENCH_RECIPE_WHEEL` names the wheel; elsewhere the test builds a wheel
and a fresh environment of its own (a few minutes)."""
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from wheels import build_wheel

HERE = Path(__file__).parent
DOC = HERE.parent.parent / "docs" / "ci.md"


def recipe_commands(platform: str) -> list[str]:
    """The shell commands of one platform's YAML block in docs/ci.md, the install first."""
    text = DOC.read_text()
    section = text.split(f"## {platform}", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    return re.findall(r"^\s*- (?:run: )?(ctcbench .*|pytest .*|pip install .*)$", block, re.M)


def with_wheel(install: str, wheel: Path) -> str:
    """The recipe's install line with a built wheel in place of the released `ctcbench`."""
    line, n = re.subn(r"(?<= )ctcbench(?= |$)", str(wheel), install)
    assert n == 1, install
    return line


def save_baseline_command() -> str:
    return re.search(r"^\s+(ctcbench compare .*--save-baseline \S+)$", DOC.read_text(),
                     re.M).group(1)


def project(tmp_path, broken: bool) -> Path:
    root = tmp_path / "project"
    shutil.copytree(HERE / "scratch", root)
    if broken:
        shutil.copy(root / "broken.py", root / "mypkg" / "ctc.py")
    return root


def sh(command: str, cwd: Path, venv: Path) -> subprocess.CompletedProcess:
    """`command` in `cwd` with the fresh environment's commands first on the path; pip keeps
    its configuration and its cache."""
    env = {"PATH": f"{venv / 'bin'}:/usr/bin:/bin", "CTCBENCH_THREADS": "1", "HOME": str(cwd),
           "PIP_CACHE_DIR": str(Path.home() / ".cache" / "pip"),
           **{k: v for k, v in os.environ.items() if k.startswith("PIP_")}}
    return subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


PLATFORMS = ("GitHub Actions", "GitLab CI")


@pytest.mark.long
def test_each_recipe_passes_a_correct_binding_and_fails_the_planted_bug(tmp_path):
    """Every platform's recipe; the platforms' YAML differs around the same commands, so each
    distinct list of commands runs once, in its own fresh environment (a few minutes each)."""
    given = os.environ.get("CTCBENCH_RECIPE_WHEEL")
    wheel = Path(given) if given else build_wheel(tmp_path / "wheel")
    recipes = sorted({tuple(recipe_commands(platform)) for platform in PLATFORMS})
    for k, commands in enumerate(recipes):
        run_recipe(list(commands), wheel, tmp_path / str(k),
                   venv=Path(sys.prefix) if given else None)


def run_recipe(commands: list[str], wheel: Path, tmp_path: Path, venv: Path | None) -> None:
    """The recipe's commands in ``venv``, or in a fresh one made here."""
    assert [c.split()[0] for c in commands] == ["pip", "ctcbench", "pytest"]
    install, *steps = commands
    install = with_wheel(install, wheel)
    if venv is None:
        venv = tmp_path / "venv"
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True, timeout=300)

    good = project(tmp_path / "good", broken=False)
    done = sh(install, good, venv)
    assert done.returncode == 0, (install, done.stdout[-3000:], done.stderr[-3000:])
    where = sh("python -c 'import ctcbench; print(ctcbench.__file__)'", good, venv)
    assert Path(where.stdout.strip()).is_relative_to(venv), where  # the wheel, not the checkout
    first = sh(save_baseline_command(), good, venv)
    assert first.returncode == 0, first.stdout[-2000:]
    assert (good / "ctc-baseline.json").is_file()
    for command in steps:
        done = sh(command, good, venv)
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-2000:])
    assert (good / "reports" / "ctc" / "report.html").is_file()  # the artifact's page

    bad = project(tmp_path / "bad", broken=True)
    shutil.copy(good / "ctc-baseline.json", bad / "ctc-baseline.json")
    done = sh(install, bad, venv)  # ctcbench is there already; the project is now this one
    assert done.returncode == 0, (install, done.stdout[-3000:], done.stderr[-3000:])
    compare, tests = (sh(c, bad, venv) for c in steps)
    assert compare.returncode == 1 and tests.returncode == 1
    assert "tf_dense_blank_index_2" in compare.stdout  # blank 2: the dropped argument shows
    assert re.search(r"FAILED mypkg\.ctc:ctc_loss::tf_dense_blank_index_2\[float\d+\]",
                     tests.stdout), tests.stdout[-3000:]
