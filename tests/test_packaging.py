"""Packaging: a regular (non-editable) install ships every subpackage and data file."""
from __future__ import annotations

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_every_subpackage_is_listed_in_pyproject():
    """Every folder of ctcbench/ holding Python files is a listed package with an __init__.py,
    so `pip install .` (not only an editable install) ships it."""
    listed = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"])
    found = {"ctcbench." + ".".join(p.relative_to(ROOT / "ctcbench").parts)
             for p in (ROOT / "ctcbench").rglob("*") if p.is_dir() and any(p.glob("*.py"))}
    assert found <= listed, sorted(found - listed)
    for name in found:
        assert (ROOT / Path(*name.split("."))).joinpath("__init__.py").is_file(), name
