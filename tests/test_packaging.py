"""Packaging: the wheel, what a regular install ships, holds every module and data file of the
tree at its place in the package, read off the tree so that a new folder cannot be left out."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import ctcbench

from wheels import ROOT, build_wheel, difference, package_dir, tree_files, wheel_files


def test_the_wheel_holds_every_file_of_the_tree_and_nothing_else(tmp_path):
    """Every .py of ctcbench/ and backends/, every case file under cases/ (its data folders
    too) and every template, at the place package-dir maps it to; no stale file."""
    wheel = build_wheel(tmp_path)
    assert not difference(tree_files(), wheel_files(wheel))


def test_the_check_can_fail(tmp_path):
    """On a made-up tree: a data folder that a hand-kept glob missed, a module in a folder
    without __init__.py and a stale module are reported; bytecode is not expected."""
    mapping = '{ "ctcbench" = "ctcbench", "ctcbench.cases" = "cases" }'
    (tmp_path / "pyproject.toml").write_text(f"[tool.setuptools]\npackage-dir = {mapping}\n")
    for name in ("ctcbench/__init__.py", "ctcbench/new/mod.py", "ctcbench/__pycache__/x.pyc",
                 "cases/__init__.py", "cases/a.toml", "cases/decoders/b.toml", "cases/.a.toml.swp"):
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("")
    want = tree_files(tmp_path)
    assert want == {"ctcbench/__init__.py", "ctcbench/new/mod.py", "ctcbench/cases/__init__.py",
                    "ctcbench/cases/a.toml", "ctcbench/cases/decoders/b.toml"}
    # what the old configuration shipped: listed packages, globs "*.toml" and "peers/*.toml"
    shipped = {"ctcbench/__init__.py", "ctcbench/cases/__init__.py", "ctcbench/cases/a.toml",
               "ctcbench/old.py"}
    assert difference(want, shipped) == {
        "missing": ["ctcbench/cases/decoders/b.toml", "ctcbench/new/mod.py"],
        "not in the tree": ["ctcbench/old.py"]}
    assert difference(want, want) == {}


def test_the_layout_doc_states_the_mapping_of_pyproject():
    """docs/layout.md's paragraph on the installed package names each folder's package as
    pyproject.toml's package-dir maps it."""
    text = (ROOT / "docs" / "layout.md").read_text()
    (paragraph,) = [p for p in text.split("\n\n") if "`package-dir`" in p]
    stated = dict((name, folder) for folder, name in
                  re.findall(r"`([a-z_]+)/` is `(ctcbench[a-z_.]*)`", paragraph))
    assert stated == package_dir()


def test_python_dash_m_runs_the_command_line(tmp_path):
    """`python -m ctcbench` is the command line: its help lists the commands."""
    done = subprocess.run([sys.executable, "-m", "ctcbench", "--help"], cwd=tmp_path,
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("Usage: python -m ctcbench [OPTIONS] COMMAND")
    assert {"compare", "cases", "report"} <= set(re.findall(r"^  (\w+)\s", done.stdout, re.M))


@pytest.mark.skipif(not os.environ.get("CTCBENCH_EXPECT_INSTALLED"),
                    reason="run by .ci/run's wheel job (CTCBENCH_EXPECT_INSTALLED=1), with the "
                           "wheel installed and the tests run from outside the checkout")
def test_the_tests_import_the_installed_wheel():
    """In the wheel job: `import ctcbench` is the installed package, not the checkout, and
    the installed package holds every file of the tree."""
    installed = Path(ctcbench.__file__).resolve().parent
    assert ROOT not in installed.parents, installed
    have = {"/".join(("ctcbench", *p.relative_to(installed).parts))
            for p in installed.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    assert not difference(tree_files(), have)
