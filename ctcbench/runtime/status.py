"""What became of one backend on one problem, as compare's and bench's rows record it: the
one vocabulary of those row statuses (compare, bench, the datasheet's info and speed rows, the
pytest plugin), failures first. Each run kind declares the words its rows may hold
(``RunKind.statuses``); the other drivers' words are Enums of their own, beside their code."""
from __future__ import annotations

from enum import StrEnum


class Status(StrEnum):
    """A row's ``status``; a str, so rows stay plain JSON and compare equal to the word."""

    MISMATCH = "mismatch"  # it ran and a check failed
    CRASHED = "crashed"  # an isolated backend's worker died (BackendCrashed)
    TIMEOUT = "timeout"  # ... or hung (BackendTimeout)
    ERROR = "error"  # it raised
    KNOWN = "known"  # a failure listed as a known upstream bug: recorded, not failing
    UNSUPPORTED = "unsupported"  # it declines the problem (a dtype, an upstream gradient)
    SKIPPED = "skipped"  # it cannot run here
    OK = "ok"


ORDER = tuple(Status)  # failures first: tables and pages sort rows by it
FAILING = (Status.MISMATCH, Status.CRASHED, Status.TIMEOUT, Status.ERROR)
CHECKED = (*FAILING, Status.KNOWN, Status.OK)  # rows where a backend really ran on a case
TRANSIENT = (Status.ERROR, Status.CRASHED, Status.TIMEOUT)  # ``resume`` runs them again
# a timing row's (bench, the datasheet's speed stage): nothing is checked, so no mismatch or known
TIMED = (Status.OK, *TRANSIENT, Status.UNSUPPORTED, Status.SKIPPED)
