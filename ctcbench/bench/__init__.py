"""``ctcbench bench``: time and peak memory of forward+backward over a size grid."""
from ctcbench.bench.run import bench

__all__ = ["bench"]
