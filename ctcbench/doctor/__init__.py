"""``ctcbench doctor``: what is wrong with a user's CTC tensors, ranked, with fixes."""
from ctcbench.doctor.diagnose import diagnose

__all__ = ["diagnose"]
