"""The run folders ``ctcbench atlas`` writes: one row per atlas entry, and in ``compare/``
the compare run folder of each backend tried."""
from enum import StrEnum

from ctcbench.runs.kinds import RunKind


class Outcome(StrEnum):
    """An atlas row's ``status``: what trying the entry here showed."""

    REPRODUCES = "reproduces"
    FIXED = "fixed"  # tried, and it does not reproduce with the installed release
    CANNOT_TRY = "cannot try"
    GPU_ONLY = "gpu only"
    NO_CASE = "no case"


UNTRIED = (Outcome.CANNOT_TRY, Outcome.GPU_ONLY, Outcome.NO_CASE)  # not tried here: the row's
# reason says why, in the table and on the page


KIND = RunKind("atlas", row_format=1, key=("id",), floats=(),
               exports=("rows.json", "versions.json", "compare/", "versions/", "report.html"),
               context="ctcbench.atlas.page:context", statuses={"status": Outcome})
