"""docs/ci.md's recipes, run as written (all but the install) on a scratch project: a CTC
binding with its known issues passes every step; the same binding with a planted bug (it
drops the blank argument) fails the compare and the pytest step on a case whose blank is
not 0. The oracle is the case library's known answers, which the recipe's commands check."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).parent
DOC = HERE.parent.parent / "docs" / "ci.md"


def recipe_commands(platform: str) -> list[str]:
    """The shell commands of one platform's YAML block in docs/ci.md, the install left out."""
    text = DOC.read_text()
    section = text.split(f"## {platform}", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```yaml\n(.*?)```", section, re.S).group(1)
    lines = re.findall(r"^\s*- (?:run: )?(ctcbench .*|pytest .*|pip install .*)$", block, re.M)
    assert any(line.startswith("pip install") for line in lines), block
    return [line for line in lines if not line.startswith("pip install")]


def save_baseline_command() -> str:
    return re.search(r"^\s+(ctcbench compare .*--save-baseline \S+)$", DOC.read_text(),
                     re.M).group(1)


def project(tmp_path, broken: bool) -> Path:
    root = tmp_path / "project"
    shutil.copytree(HERE / "scratch", root)
    if broken:
        shutil.copy(root / "broken.py", root / "mypkg" / "ctc.py")
    return root


def sh(command: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {"PATH": f"{Path(sys.executable).parent}:/usr/bin:/bin", "CTCBENCH_THREADS": "1",
           "HOME": str(cwd)}
    return subprocess.run(command, shell=True, cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)


PLATFORMS = ("GitHub Actions", "GitLab CI")


@pytest.mark.long
def test_each_recipe_passes_a_correct_binding_and_fails_the_planted_bug(tmp_path):
    """Every platform's recipe; the platforms' YAML differs around the same commands, so each
    distinct list of commands runs once (a few minutes each)."""
    recipes = sorted({tuple(recipe_commands(platform)) for platform in PLATFORMS})
    for k, commands in enumerate(recipes):
        run_recipe(list(commands), tmp_path / str(k))


def run_recipe(commands: list[str], tmp_path: Path) -> None:
    assert [c.split()[0] for c in commands] == ["ctcbench", "pytest"]
    good = project(tmp_path / "good", broken=False)
    first = sh(save_baseline_command(), good)
    assert first.returncode == 0, first.stdout[-2000:]
    assert (good / "ctc-baseline.json").is_file()
    for command in commands:
        done = sh(command, good)
        assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-2000:])
    assert (good / "reports" / "ctc" / "report.html").is_file()  # the artifact's page

    bad = project(tmp_path / "bad", broken=True)
    shutil.copy(good / "ctc-baseline.json", bad / "ctc-baseline.json")
    compare, tests = (sh(c, bad) for c in commands)
    assert compare.returncode == 1 and tests.returncode == 1
    assert "tf_dense_blank_index_2" in compare.stdout  # blank 2: the dropped argument shows
    assert re.search(r"FAILED mypkg\.ctc:ctc_loss::tf_dense_blank_index_2\[float\d+\]",
                     tests.stdout), tests.stdout[-3000:]
