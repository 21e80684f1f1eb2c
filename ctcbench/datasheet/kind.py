"""The run folders ``ctcbench datasheet`` writes: one row per probe (a size tried, a search
candidate, a malformed input, a timing) and per verdict, keyed by backend, dtype, stage, item."""
from ctcbench.runs.kinds import RunKind

KIND = RunKind("datasheet", row_format=1, key=("backend", "dtype", "stage", "item"),
               floats=("loss_err", "grad_err", "loss_score", "loss_diff", "grad_diff", "seconds"),
               exports=("datasheet.json", "datasheet.md", "cases/", "pages/", "report.html"),
               context="ctcbench.datasheet.page:context",
               pages="ctcbench.datasheet.page:backends")
