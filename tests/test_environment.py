"""ctcbench.environment: the CPU description read against independent readings of
/proc/cpuinfo, a made-up sysfs tree and a made-up cpuinfo, and its one-line summary."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from ctcbench.environment import (cache_bytes, caches, cpu_description, cpu_line, cpu_text,
                                  environment)

PROC = Path("/proc/cpuinfo")
on_linux = pytest.mark.skipif(not PROC.is_file(), reason="no /proc/cpuinfo (not Linux)")

AMD = """processor\t: 0
vendor_id\t: AuthenticAMD
cpu family\t: 25
model\t\t: 1
model name\t: AMD EPYC 7B13
stepping\t: 1
flags\t\t: fpu sse sse2 avx fma avx2 bmi2

processor\t: 1
vendor_id\t: GenuineIntel
model name\t: not the first CPU
flags\t\t: avx512f
"""


def fake_sysfs(root: Path, entries) -> Path:
    """``root/cpu0/cache/index<i>/{level,type,size,shared_cpu_list}`` for each entry."""
    for i, (level, kind, size, shared) in enumerate(entries):
        d = root / "cpu0" / "cache" / f"index{i}"
        d.mkdir(parents=True)
        for name, value in (("level", level), ("type", kind), ("size", size),
                            ("shared_cpu_list", shared)):
            (d / name).write_text(f"{value}\n")
    return root


@on_linux
def test_vendor_and_model_are_the_first_processors_in_proc_cpuinfo():
    """vendor_id, model name and family read as /proc/cpuinfo's first block says them."""
    text = PROC.read_text()
    d = cpu_description()
    first = lambda key: re.search(rf"^{key}\s*:\s*(.*)$", text, re.M)
    for key, field in (("vendor_id", "vendor"), ("model name", "model_name")):
        if first(key):
            assert d[field] == first(key).group(1).strip()
    if first("cpu family"):
        assert d["family"] == int(first("cpu family").group(1))


@on_linux
def test_logical_cpus_are_the_processor_blocks_of_proc_cpuinfo():
    """The logical CPU count matches the number of 'processor' lines."""
    count = len(re.findall(r"^processor\s*:", PROC.read_text(), re.M))
    assert cpu_description()["logical_cpus"] == count


def test_caches_from_a_made_up_sysfs_tree(tmp_path):
    """L1d, L2 and L3 sizes in bytes and how many CPUs share each; instruction caches left out."""
    root = fake_sysfs(tmp_path, [(1, "Data", "32K", "0,64"), (1, "Instruction", "32K", "0,64"),
                                 (2, "Unified", "1024K", "0,64"),
                                 (3, "Unified", "32768K", "0-7,64-71")])
    assert caches(root) == {"L1d": {"bytes": 32 << 10, "shared_by": 2},
                            "L2": {"bytes": 1 << 20, "shared_by": 2},
                            "L3": {"bytes": 32 << 20, "shared_by": 16}}


def test_cache_sizes_in_each_unit():
    """sysfs writes sizes with K (and may with M or G); junk is None."""
    assert [cache_bytes(s) for s in ("48K", "2M", "1G", "512", "big")] == [
        49152, 2097152, 1073741824, 512, None]


def test_a_made_up_cpuinfo_gives_every_field_of_its_first_processor(tmp_path):
    """vendor, family/model/stepping and the widest SIMD flag (avx2 here) of the first block."""
    (tmp_path / "cpuinfo").write_text(AMD)
    d = cpu_description(cpuinfo=tmp_path / "cpuinfo", sysfs=tmp_path / "none")
    assert (d["vendor"], d["model_name"], d["family"], d["model"], d["stepping"], d["simd"]) == (
        "AuthenticAMD", "AMD EPYC 7B13", 25, 1, 1, "avx2")
    assert d["caches"] == {}


def test_missing_files_give_none_fields_and_still_a_line(tmp_path):
    """No cpuinfo and no sysfs (another OS): None fields, no error, a line that says so."""
    d = cpu_description(cpuinfo=tmp_path / "no-cpuinfo", sysfs=tmp_path / "no-sysfs")
    assert [d[k] for k in ("vendor", "model_name", "family", "model", "stepping", "simd")] == [
        None] * 6
    assert d["caches"] == {} and d["logical_cpus"] == os.cpu_count()
    assert cpu_line(d).startswith("unknown CPU")


def test_line_of_a_full_description():
    """Every field in its place, caches in binary units."""
    d = {"vendor": "GenuineIntel", "model_name": "Intel(R) Xeon(R) Processor", "family": 6,
         "model": 167, "stepping": 1, "simd": "avx512f", "logical_cpus": 2,
         "llvm_target": "rocketlake",
         "caches": {"L1d": {"bytes": 48 << 10, "shared_by": 1},
                    "L2": {"bytes": 2 << 20, "shared_by": 1},
                    "L3": {"bytes": 480 << 20, "shared_by": 2}}}
    assert cpu_line(d) == ("GenuineIntel Intel(R) Xeon(R) Processor (family 6 model 167, LLVM "
                           "target rocketlake, AVX-512, L1d 48 KiB, L2 2 MiB, L3 480 MiB, 2 CPUs)")


def test_environment_keeps_cpu_and_adds_its_detail():
    """The sidecar keeps the model string under "cpu" and gains "cpu_detail"; a sidecar saved
    before "cpu_detail" still reads as one line."""
    env = environment()
    assert isinstance(env["cpu"], str) and env["cpu_detail"]["logical_cpus"] == os.cpu_count()
    assert cpu_text({"cpu": "Some CPU", "cpu_count": 4}) == "Some CPU (4 CPUs)"
    assert cpu_text(env) == cpu_line(env["cpu_detail"])


def test_llvm_target_is_named_where_llvmlite_is_installed():
    """The LLVM target numba compiles for: a CPU name such as 'znver3' or 'skylake-avx512'."""
    pytest.importorskip("llvmlite")
    target = cpu_description()["llvm_target"]
    assert isinstance(target, str) and re.fullmatch(r"[a-z0-9_.-]+", target)


def test_describing_the_cpu_imports_no_framework():
    """llvmlite at most: neither numba nor torch is imported to describe the CPU."""
    code = ("import sys; from ctcbench.environment import cpu_description; cpu_description(); "
            "print(sorted(m for m in ('numba', 'torch') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"
