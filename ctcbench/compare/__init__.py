"""``ctcbench compare``: every backend against the case library's known answers and the
float64 reference, loss and gradient."""
from ctcbench.compare.run import compare

__all__ = ["compare"]
