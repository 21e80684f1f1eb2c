"""Where results came from: versions, CPU (model, caches, SIMD, LLVM target), threads, git
commit, UTC time."""
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


CPUINFO = Path("/proc/cpuinfo")
SYSFS_CPU = Path("/sys/devices/system/cpu")
# widest first: x86 flags, then aarch64 features
SIMD = {"avx512f": "AVX-512", "avx2": "AVX2", "avx": "AVX", "sse4_2": "SSE4.2", "sse2": "SSE2",
        "sve2": "SVE2", "sve": "SVE", "asimd": "NEON"}
CACHES = {(1, "Data"): "L1d", (2, "Unified"): "L2", (3, "Unified"): "L3"}


def _cpuinfo(path: Path) -> dict[str, str]:
    """The first processor's ``key: value`` lines of ``/proc/cpuinfo``; {} without one."""
    fields = {}
    try:
        text = path.read_text()
    except OSError:
        return fields
    for line in text.splitlines():
        if not line.strip():
            if fields:
                break  # the next processor's block
            continue
        key, sep, value = line.partition(":")
        if sep:
            fields.setdefault(key.strip(), value.strip())
    return fields


def _int(text) -> int | None:
    try:
        return int(text)
    except (TypeError, ValueError):
        return None


def cache_bytes(text: str) -> int | None:
    """``"48K"`` (sysfs' ``size``) -> 49152; None when it is not such a size."""
    text = text.strip()
    scale = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}.get(text[-1:].upper(), 1)
    n = _int(text.rstrip("KkMmGg"))
    return None if n is None else n * scale


def _cpu_count(cpu_list: str) -> int | None:
    """``"0-3,8"`` (sysfs' ``shared_cpu_list``) -> 5."""
    n = 0
    for part in cpu_list.strip().split(","):
        lo, _, hi = part.partition("-")
        if _int(lo) is None or (hi and _int(hi) is None):
            return None
        n += (_int(hi) if hi else _int(lo)) - _int(lo) + 1
    return n


def caches(sysfs: Path = SYSFS_CPU) -> dict[str, dict]:
    """CPU 0's data and unified caches: ``{"L1d": {"bytes": 49152, "shared_by": 1}, "L2":
    ..., "L3": ...}`` from ``sysfs/cpu0/cache/index*/{level,type,size,shared_cpu_list}``;
    ``bytes`` is one cache's size, ``shared_by`` the logical CPUs that share it (None where
    the kernel does not say). {} where there is no such folder."""
    out = {}
    for index in sorted(Path(sysfs, "cpu0", "cache").glob("index*")):
        try:
            level, kind, size = ((index / f).read_text().strip() for f in ("level", "type", "size"))
        except OSError:
            continue
        name = CACHES.get((_int(level), kind))
        if name is None or name in out:
            continue
        try:
            shared = _cpu_count((index / "shared_cpu_list").read_text())
        except OSError:
            shared = None
        out[name] = {"bytes": cache_bytes(size), "shared_by": shared}
    return out


def _cpu_model() -> str:
    return _cpuinfo(CPUINFO).get("model name") or platform.processor() or platform.machine()


def _llvm_target() -> str | None:
    try:
        import llvmlite.binding as llvm  # light; never numba or torch for this
        return llvm.get_host_cpu_name()
    except Exception:  # not installed, or no LLVM for this platform
        return None


def cpu_description(*, cpuinfo: Path = CPUINFO, sysfs: Path = SYSFS_CPU) -> dict:
    """What speed figures depend on: vendor (``GenuineIntel``, ``AuthenticAMD``), model name,
    family/model/stepping, caches (:func:`caches`), the widest SIMD flag (``avx512f``,
    ``avx2``, ...), logical CPUs, and the LLVM target numba compiles for. A field this
    system does not tell (not Linux, a file missing) is None."""
    info = _cpuinfo(cpuinfo)
    flags = set((info.get("flags") or info.get("Features") or "").split())
    return {"vendor": info.get("vendor_id"), "model_name": info.get("model name"),
            "family": _int(info.get("cpu family")), "model": _int(info.get("model")),
            "stepping": _int(info.get("stepping")), "caches": caches(sysfs),
            "simd": next((f for f in SIMD if f in flags), None),
            "logical_cpus": os.cpu_count(), "llvm_target": _llvm_target()}


def _size(n: int) -> str:
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale and n % (scale // 16) == 0:  # 1.5 MiB, not 1536 KiB
            return f"{n / scale:g} {unit}"
    return f"{n} B"


def cpu_line(d: dict) -> str:
    """:func:`cpu_description` in one line: ``GenuineIntel Intel(R) Xeon(R) Processor (family 6
    model 167, LLVM target rocketlake, AVX-512, L1d 48 KiB, L2 2 MiB, L3 480 MiB, 2 CPUs)``;
    what is unknown is left out."""
    head = " ".join(x for x in (d.get("vendor"), d.get("model_name")) if x) or "unknown CPU"
    parts = []
    if d.get("family") is not None and d.get("model") is not None:
        parts.append(f"family {d['family']} model {d['model']}")
    if d.get("llvm_target"):
        parts.append(f"LLVM target {d['llvm_target']}")
    if d.get("simd"):
        parts.append(SIMD.get(d["simd"], d["simd"]))
    parts += [f"{name} {_size(c['bytes'])}" for name, c in (d.get("caches") or {}).items()
              if c.get("bytes")]
    if d.get("logical_cpus"):
        parts.append(f"{d['logical_cpus']} CPUs")
    return head + (f" ({', '.join(parts)})" if parts else "")


def cpu_text(env: dict) -> str:
    """The CPU of an :func:`environment` dict in one line: :func:`cpu_line` of its
    ``cpu_detail``, or for one saved before there was that key, ``cpu (cpu_count CPUs)``."""
    env = env or {}
    if env.get("cpu_detail"):
        return cpu_line(env["cpu_detail"])
    count = f" ({env['cpu_count']} CPUs)" if env.get("cpu_count") else ""
    return f"{env.get('cpu') or 'unknown CPU'}{count}"


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
        "cpu_detail": cpu_description(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch_threads(),
        "env_threads": {k: os.environ[k] for k in ("OMP_NUM_THREADS", "MKL_NUM_THREADS")
                        if k in os.environ},
        "git_commit": _git_commit(),
        "packages": packages,
    }
