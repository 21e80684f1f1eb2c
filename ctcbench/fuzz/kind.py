"""The run folders ``ctcbench fuzz`` writes: one row per search, the shrunk finds as case
files in ``cases/`` and hypothesis's database in ``hypothesis/``."""
from ctcbench.runs.kinds import RunKind

KIND = RunKind("fuzz", row_format=1, key=("search",), floats=("seconds", "budget_s"),
               exports=("cases/", "hypothesis/", "report.html"),
               context="ctcbench.fuzz.page:context")
