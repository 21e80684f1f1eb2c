"""The wheel a user installs, built from the tree as it is now, and what it must hold."""
from __future__ import annotations

import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# what a build reads besides the package folders: the metadata, setup.py, the readme
BUILD_FILES = ("pyproject.toml", "setup.py", "README.md")


def package_dir(root: Path = ROOT) -> dict[str, str]:
    """pyproject.toml's mapping of dotted package names to the folders that hold them."""
    return tomllib.loads((root / "pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


def tree_files(root: Path = ROOT) -> set[str]:
    """Every file under the mapped folders, at its path in the installed package: all but
    __pycache__ (bytecode, numba's kernel cache) and hidden files."""
    found = set()
    for name, folder in package_dir(root).items():
        for path in (root / folder).rglob("*"):
            inside = path.relative_to(root / folder).parts
            if path.is_file() and not any(p == "__pycache__" or p.startswith(".") for p in inside):
                found.add("/".join((*name.split("."), *inside)))
    return found


def wheel_files(wheel: Path) -> set[str]:
    """The files of a wheel, its .dist-info left out."""
    return {n for n in zipfile.ZipFile(wheel).namelist() if ".dist-info/" not in n}


def difference(want: set[str], have: set[str]) -> dict[str, list[str]]:
    """What a wheel lacks and what it holds that the tree does not (stale files of an old
    build); empty when they agree."""
    out = {"missing": sorted(want - have), "not in the tree": sorted(have - want)}
    return {k: v for k, v in out.items() if v}


def build_wheel(dest: Path) -> Path:
    """The wheel, built by pip from a copy of the sources, so that no build/ folder of an
    earlier build can add stale files and the checkout is left as it is."""
    src = dest / "src"
    src.mkdir(parents=True)
    for name in BUILD_FILES:
        shutil.copy2(ROOT / name, src / name)
    for folder in set(package_dir().values()):
        shutil.copytree(ROOT / folder, src / folder, ignore=shutil.ignore_patterns("*.egg-info"))
    done = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps",
                           "--no-build-isolation", "--quiet", "-w", str(dest / "dist"), str(src)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    (wheel,) = (dest / "dist").glob("ctcbench-*.whl")
    return wheel
