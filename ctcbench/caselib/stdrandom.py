"""C++ ``<random>`` draws reproduced in NumPy, so a peer's randomly drawn test inputs can be
rebuilt exactly (warp-ctc's tests draw activations and labels from ``std::mt19937``).

``numpy.random.RandomState(seed)`` seeds MT19937 with the same ``init_genrand`` as
``std::mt19937(seed)``, and a full-range 32-bit ``randint`` returns its raw outputs.
libstdc++'s distributions on top of it:
  * ``uniform_real_distribution<double>`` (``<>``): ``generate_canonical<double, 53>`` takes two
    draws, ``(g1 + g2 * 2**32) / 2**64`` in double, then ``a + (b - a) * u``;
  * ``uniform_real_distribution<float>``: one draw, ``float(g) / 2**32`` in float32;
  * ``uniform_int_distribution<int>(a, b)`` (libstdc++ >= 11): Lemire's multiply-and-shift on
    one 32-bit draw, redrawn while the low word is below ``2**32 mod (b - a + 1)``.
"""
from __future__ import annotations

import numpy as np


def mt19937_raw(seed: int, n: int) -> np.ndarray:
    """``(n,)`` uint64: the first ``n`` outputs of ``std::mt19937(seed)``."""
    rs = np.random.RandomState(seed)
    return rs.randint(0, 2**32, size=n, dtype=np.uint32).astype(np.uint64)


def uniform_real(seed: int, n: int, *, low: float = 0.0, high: float = 1.0,
                 real: str = "double") -> np.ndarray:
    """``(n,)`` float64: ``n`` draws of ``std::uniform_real_distribution<REAL>(low, high)``
    from a fresh ``std::mt19937(seed)``; ``real`` is ``"double"`` or ``"float"``."""
    if real == "double":
        g = mt19937_raw(seed, 2 * n).astype(np.float64).reshape(n, 2)
        u = (g[:, 0] + g[:, 1] * 2.0**32) / 2.0**64  # (n,)
        u = np.where(u >= 1.0, np.nextafter(1.0, 0.0), u)
        return low + (high - low) * u
    if real == "float":
        g = mt19937_raw(seed, n).astype(np.float32)
        u = g / np.float32(2.0**32)  # (n,) float32
        u = np.where(u >= 1, np.nextafter(np.float32(1), np.float32(0)), u)
        return (np.float32(low) + (np.float32(high) - np.float32(low)) * u).astype(np.float64)
    raise ValueError(f"real: expected 'double' or 'float', got {real!r}")


def uniform_int(seed: int, n: int, low: int, high: int) -> list[int]:
    """``n`` draws of libstdc++'s ``std::uniform_int_distribution<int>(low, high)`` from a fresh
    ``std::mt19937(seed)``."""
    span = high - low + 1
    threshold = (2**32 - span) % span  # -range % range in 32-bit unsigned arithmetic
    rs, out = np.random.RandomState(seed), []
    while len(out) < n:
        product = int(rs.randint(0, 2**32, dtype=np.uint32)) * span
        if product % 2**32 < span:
            while product % 2**32 < threshold:
                product = int(rs.randint(0, 2**32, dtype=np.uint32)) * span
        out.append(low + (product >> 32))
    return out
