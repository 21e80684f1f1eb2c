"""The run folders ``ctcbench atlas`` writes: one row per atlas entry, and in ``compare/``
the compare run folder of each backend tried."""
from ctcbench.runs.kinds import RunKind

KIND = RunKind("atlas", row_format=1, key=("id",), floats=(),
               exports=("rows.json", "compare/", "report.html"),
               context="ctcbench.atlas.page:context")
