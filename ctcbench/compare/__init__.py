"""``ctcbench compare``: every backend against the case library's known answers and the
float64 reference, loss and gradient."""

__all__ = ["compare"]


def __getattr__(name: str):
    if name == "compare":  # loaded on first use: the command line imports this package's
        # command and config only, and run.py's pandas stays out of `ctcbench --help`
        from ctcbench.compare.run import compare
        return compare
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
