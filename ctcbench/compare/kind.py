"""The run folders ``ctcbench compare`` writes: one row per backend, case, dtype and device."""
from ctcbench.runs.kinds import RunKind
from ctcbench.runtime.status import Status

KEY = ("backend", "case", "dtype", "device")
NUMBERS = ("loss", "expected_loss", "abs_err", "rel_err", "grad_err", "ref_loss_err",
           "ref_grad_err", "margin", "time_s", "sample_loss", "sample_expected",
           "sample_err")  # None: not applicable; NaN: a NaN result

KIND = RunKind("compare", row_format=1, key=KEY, floats=NUMBERS,
               exports=("rows.csv", "rows.json", "margins.png", "report.html"),
               context="ctcbench.compare.page:context", statuses={"status": Status})
