"""Where results came from: versions, CPU, threads, git commit, UTC time."""
from __future__ import annotations

import datetime as _dt
import importlib.metadata
import os
import platform
import subprocess
from pathlib import Path

CORE_PACKAGES = ("ctcbench", "numpy", "torch", "pandas")


def _version(package: str) -> str | None:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return None


def _cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit() -> str | None:
    here = Path(__file__).resolve().parent
    try:
        out = subprocess.run(["git", "rev-parse", "HEAD"], cwd=here, capture_output=True,
                             text=True, timeout=5)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def torch_threads() -> int | None:
    import sys
    torch = sys.modules.get("torch")  # report only; never import a framework for this
    return torch.get_num_threads() if torch is not None else None


def environment(extra_packages=()) -> dict:
    """A JSON-ready description of this machine and software, for a results sidecar."""
    packages = {p: _version(p) for p in (*CORE_PACKAGES, *extra_packages)}
    return {
        "utc_time": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": _cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch_threads(),
        "env_threads": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
                        if k in os.environ},
        "git_commit": _git_commit(),
        "packages": packages,
    }
