"""``ctcbench fuzz``: property-based search for the smallest problem on which a backend is wrong."""

__all__ = ["fuzz"]


def __getattr__(name: str):
    if name == "fuzz":  # loaded on first use: the command line imports this package's command
        # and config only, and run.py's hypothesis stays out of `ctcbench --help`
        from ctcbench.fuzz.run import fuzz
        return fuzz
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
