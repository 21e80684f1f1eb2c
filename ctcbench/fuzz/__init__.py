"""``ctcbench fuzz``: property-based search for the smallest problem on which a backend is wrong."""
from ctcbench.fuzz.run import fuzz

__all__ = ["fuzz"]
