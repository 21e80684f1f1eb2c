"""The run folders ``ctcbench datasheet`` writes: one row per probe (a size tried, a search
candidate, a malformed input, a timing) and per verdict, keyed by backend, dtype, stage, item;
each stage's status is a word of its own vocabulary, declared beside the stage's code."""
from ctcbench.datasheet import search
from ctcbench.datasheet.determinism import Repeats
from ctcbench.runs.kinds import RunKind, SortedBy
from ctcbench.runtime.malformed import Reaction
from ctcbench.runtime.status import TIMED, Status

STATUSES = SortedBy("stage", {
    "info": {"status": (Status.OK, Status.SKIPPED)},  # the backend runs here, or cannot
    "probe": {"status": search.Status},  # a size of an axis tried
    "confirm": {"status": search.Status},  # ... again at another seed
    "limit": {"status": search.Cliff, "past_status": (search.Status, None)},  # an axis' verdict
    "trial": {"status": search.Status},  # a candidate of the precision search
    "precision": {},  # its verdict: counts and the worst candidates
    "robustness": {"status": Reaction},
    "determinism": {"status": Repeats},
    "speed": {"status": TIMED},  # the bench's timing rows
})

KIND = RunKind("datasheet", row_format=1, key=("backend", "dtype", "stage", "item"),
               floats=("loss_err", "grad_err", "loss_score", "loss_diff", "grad_diff", "seconds"),
               exports=("datasheet.json", "datasheet.md", "cases/", "pages/", "report.html"),
               context="ctcbench.datasheet.page:context",
               pages="ctcbench.datasheet.page:backends", statuses=STATUSES)
