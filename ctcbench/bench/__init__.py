"""``ctcbench bench``: time and peak memory of forward+backward over a size grid."""

__all__ = ["bench"]


def __getattr__(name: str):
    if name == "bench":  # loaded on first use: the command line imports this package's command
        # and config only, and run.py's pandas stays out of `ctcbench --help`
        from ctcbench.bench.run import bench
        return bench
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
