"""Who imports whom in the runtime: the worker needs no registry, a backend needs no worker."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

BACKENDS = Path(__file__).resolve().parents[2] / "backends"


def test_importing_the_worker_imports_no_registry():
    """A fresh interpreter that imports ctcbench.runtime.worker (what a worker process runs)
    has no ctcbench.runtime.registry in sys.modules."""
    code = ("import sys, ctcbench.runtime.worker; "
            "print(sorted(m for m in sys.modules if m.startswith('ctcbench.runtime')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    loaded = ast.literal_eval(out.stdout.strip())
    assert "ctcbench.runtime.worker" in loaded  # the check saw the import
    assert "ctcbench.runtime.registry" not in loaded


def _imported(path: Path) -> set[str]:
    """Every module name an import statement of ``path`` names (relative ones resolved
    inside ctcbench.backends)."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom):
            base = "ctcbench.backends" if node.level else ""
            module = ".".join(p for p in (base, node.module or "") if p)
            names |= {module} | {f"{module}.{a.name}" for a in node.names}
    return names


@pytest.mark.parametrize("path", sorted(BACKENDS.glob("*.py")), ids=lambda p: p.name)
def test_no_backend_imports_the_worker(path):
    """Adapters take thread settings from ctcbench.runtime.threads, never from the worker."""
    worker = {n for n in _imported(path) if n == "ctcbench.runtime.worker"
              or n.startswith("ctcbench.runtime.worker.")}
    assert not worker, f"{path.name} imports {sorted(worker)}"


def test_the_import_finder_sees_a_worker_import(tmp_path):
    """The check above would catch both forms of the import."""
    module = tmp_path / "m.py"
    module.write_text("from ctcbench.runtime.worker import THREADS_ENV\n"
                      "import ctcbench.runtime.worker as w\n")
    assert {"ctcbench.runtime.worker", "ctcbench.runtime.worker.THREADS_ENV"} <= _imported(module)
