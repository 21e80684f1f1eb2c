"""``ctcbench report``: one self-contained HTML page per run folder (compare, bench,
convergence) or doctor diagnosis, readable offline and as an attachment."""
from ctcbench.report.render import write_doctor_report, write_report

__all__ = ["write_report", "write_doctor_report"]
