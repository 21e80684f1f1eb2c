"""The wheel's packages and package data, read off the tree so that no new folder is left out.

pyproject.toml's `package-dir` maps the three top-level folders into the package (`ctcbench/`,
`backends/` -> `ctcbench.backends`, `cases/` -> `ctcbench.cases`). Under them, every folder with
an `__init__.py` is a package, and every other file that is not Python source (templates, styles,
case files in data folders such as `cases/decoders/`) is data of the nearest package above it.
"""
import tomllib
from pathlib import Path

from setuptools import setup

ROOTS = tomllib.loads(Path("pyproject.toml").read_text())["tool"]["setuptools"]["package-dir"]


def shipped(path: Path) -> bool:
    """Not bytecode, numba's kernel cache (both in __pycache__) or a hidden file."""
    return not any(part == "__pycache__" or part.startswith(".") for part in path.parts)


def packages() -> dict[Path, str]:
    """Each package's folder -> its dotted name."""
    return {init.parent: ".".join((name, *init.parent.relative_to(root).parts))
            for name, root in ROOTS.items()
            for init in Path(root).rglob("__init__.py") if shipped(init)}


def package_data(found: dict[Path, str]) -> dict[str, list[str]]:
    """Each package's data files, relative to its folder."""
    data: dict[str, list[str]] = {}
    for root in ROOTS.values():
        for path in sorted(Path(root).rglob("*")):
            if path.is_file() and shipped(path) and path.suffix not in (".py", ".pyc"):
                folder = next(p for p in path.parents if p in found)
                data.setdefault(found[folder], []).append(path.relative_to(folder).as_posix())
    return data


if __name__ == "__main__":
    FOUND = packages()
    setup(packages=sorted(FOUND.values()), package_data=package_data(FOUND))
