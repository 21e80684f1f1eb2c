"""The run folders ``ctcbench bench`` writes: one row per backend, size, dtype and thread count."""
from ctcbench.runs.kinds import RunKind
from ctcbench.runtime.status import TIMED

KEY = ("backend", "T", "N", "C", "L", "dtype", "threads", "beam")  # beam: decoders only
FLOATS = ("time_median_s", "time_min_s", "time_max_s", "ns_per_cell", "ratio_to_torch",
          "ratio_min", "ratio_max", "peak_rss_mb", "ns_per_frame", "ratio_to_greedy")

KIND = RunKind("bench", row_format=1, key=KEY, floats=FLOATS, optional_key=("beam",),
               exports=("bench.csv", "bench.json", "*.png", "report.html"),
               context="ctcbench.bench.page:context", pair="ctcbench.bench.page:before_after",
               statuses={"status": TIMED})
