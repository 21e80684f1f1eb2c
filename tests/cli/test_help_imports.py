"""`ctcbench --help` loads no data, search, plotting or framework library: the commands import
their heavy parts when they run. Read from Python's own import log (``-X importtime``) of the
real entry points, in a fresh process."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

HEAVY = ("pandas", "hypothesis", "numba", "torch", "jax", "jaxlib", "optax", "tensorflow",
         "paddle", "keras", "mindspore", "matplotlib", "scipy", "sklearn", "dask", "lightning")
SCRIPT = Path(sys.executable).with_name("ctcbench")  # the console script beside this Python


def imported(command: list[str]) -> set[str]:
    """The top-level names of every module ``command`` imported (it must exit 0)."""
    env = {**os.environ, "PYTHONPROFILEIMPORTTIME": "1"}  # -X importtime, for a script too
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    lines = [line.rpartition("|")[2] for line in done.stderr.splitlines()
             if line.startswith("import time:")]
    return {line.strip().split(".")[0] for line in lines}


@pytest.mark.parametrize("command", [
    [sys.executable, "-m", "ctcbench", "--help"],
    pytest.param([str(SCRIPT), "--help"], marks=pytest.mark.skipif(
        not SCRIPT.exists(), reason="no ctcbench console script beside this Python")),
], ids=["python -m ctcbench", "ctcbench"])
def test_help_imports_no_heavy_library(command):
    """Nothing of HEAVY is imported by the top-level help (the command list)."""
    names = imported(command)
    assert "ctcbench" in names and "click" in names  # the log was read
    assert not names & set(HEAVY), sorted(names & set(HEAVY))


def test_the_check_can_fail():
    """The same reading sees pandas when a command's run module is imported up front."""
    names = imported([sys.executable, "-c", "import ctcbench.compare.run"])
    assert "pandas" in names


def commands() -> list[str]:
    from ctcbench.cli import cli
    return sorted(cli.commands)


@pytest.mark.parametrize("name", commands())
def test_each_commands_help_imports_no_heavy_library(name):
    """Nor does any command's own --help: its options are declared without the libraries
    its run needs (convergence's settings without torch, say)."""
    names = imported([sys.executable, "-m", "ctcbench", name, "--help"])
    assert "ctcbench" in names and "click" in names
    assert not names & set(HEAVY), sorted(names & set(HEAVY))
