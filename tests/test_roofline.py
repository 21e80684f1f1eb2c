"""benchmarks/roofline.py's arithmetic: which stream a working set is charged at, and the
estimate per DP cell from given part timings, worked out by hand (no timing here)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
_spec = importlib.util.spec_from_file_location("roofline", ROOT / "benchmarks" / "roofline.py")
roofline = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(roofline)  # imports neither numba nor the kernel

MiB = 1 << 20
NS = {"forward": 1.0, "backward": 2.0, "softmax": 401.0, "gather/scatter": 802.0}
COPY = {"L2": 50.0, "L3": 20.0, "memory": 10.0}  # bytes per ns


@pytest.mark.parametrize("nbytes, l2, l3, expected", [
    (2 * MiB, 2 * MiB, 32 * MiB, "L2"),  # fits exactly
    (2 * MiB + 1, 2 * MiB, 32 * MiB, "L3"),
    (32 * MiB + 1, 2 * MiB, 32 * MiB, "memory"),
    (1 * MiB, None, None, "L3"),  # caches unknown: the 16 MiB buffer decides
    (17 * MiB, None, None, "memory"),
])
def test_level_of_a_working_set(nbytes, l2, l3, expected):
    """A working set goes to the smallest cache it fits."""
    assert roofline.level(nbytes, l2, l3) == expected


def test_estimate_of_a_table_kept_whole():
    """T=1000 N=32 C=100 L=200: S = 401, a row 403 * 8 = 3224 bytes, the table 3.2 MB (past a
    2 MiB L2: at L3's 20 bytes/ns), the logits 25.6 MB (in a 480 MiB L3)."""
    est = roofline.estimate(1000, 32, 100, 200, ns=NS, copy_gbs=COPY, kept=1000,
                            l2=2 * MiB, l3=480 * MiB)
    expected = {"forward row": 1.0, "backward row": 2.0, "softmax": 1.0, "gather/scatter": 2.0,
                "forward table": 6448 / 401 / 20, "logits/gradient": 1600 / 401 / 20}
    assert est == pytest.approx({**expected, "total": 6 + 8048 / 8020})


def test_estimate_of_a_segmented_table():
    """T=20000 L=200 kept in 60-frame segments (334 of them): 333 * 59 = 19647 rows computed
    twice, each segment (193440 bytes) in L2; the 512 MB of logits past a 480 MiB L3."""
    est = roofline.estimate(20000, 32, 100, 200, ns=NS, copy_gbs=COPY, kept=60,
                            l2=2 * MiB, l3=480 * MiB)
    redo = 19647 / 20000
    assert est["forward row"] == pytest.approx(1 + redo)
    assert est["forward table"] == pytest.approx((2 + redo) * 3224 / 401 / 50)
    assert est["logits/gradient"] == pytest.approx(1600 / 401 / 10)
    assert est["total"] == pytest.approx(sum(v for k, v in est.items() if k != "total"))
