"""The run folders ``ctcbench compare`` writes: one row per backend, case, dtype and device."""
from ctcbench.runs.kinds import RunKind
from ctcbench.runtime.protocol import BackendUnavailable
from ctcbench.runtime.status import Status

KEY = ("backend", "case", "dtype", "device")
NUMBERS = ("loss", "expected_loss", "abs_err", "rel_err", "grad_err", "ref_loss_err",
           "ref_grad_err", "margin", "time_s", "sample_loss", "sample_expected",
           "sample_err")  # None: not applicable; NaN: a NaN result

KIND = RunKind("compare", row_format=1, key=KEY, floats=NUMBERS,
               exports=("rows.csv", "rows.json", "margins.png", "report.html"),
               context="ctcbench.compare.page:context", statuses={"status": Status})


def load_failure(exc: Exception) -> tuple[Status, str]:
    """``(status, reason)`` of the one row of a backend or decoder that did not load: skipped
    when it cannot run here, an error for a broken plugin (it fails the run, the others go on)."""
    if isinstance(exc, BackendUnavailable):
        return Status.SKIPPED, str(exc)
    return Status.ERROR, f"failed to load: {type(exc).__name__}: {exc}"
