"""The order of a batch's axes, as a user holds it: the one vocabulary of layouts.

Shape letters as in :mod:`ctcbench.core.problem`: ``T`` frames, ``N`` batch, ``C`` classes.
"""
from __future__ import annotations

LAYOUTS = ("TNC", "NTC")  # time-major (torch's ctc_loss, CTCProblem), batch-major (optax, Keras)
