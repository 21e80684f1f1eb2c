"""A doctor diagnosis as report context: what the doctor understood of the inputs, each
finding with its evidence and fix, and the frames plot."""
from __future__ import annotations

import json
from pathlib import Path

from ctcbench.formatting import num

EVIDENCE_CHARS = 400  # a long list of samples is cut here; the JSON output has it whole


def evidence_text(value) -> str:
    """One evidence value for people: numbers to 4 significant digits, lists as JSON."""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return num(value, ".4g")
    text = value if isinstance(value, str) else json.dumps(value, default=str)
    return text if len(text) <= EVIDENCE_CHARS else text[: EVIDENCE_CHARS - 1] + "…"


def doctor_context(result, inputs: dict, *, layout: str = "TNC", source: str = "",
                   samples: int = 4) -> dict:
    """``result``: a ``ctcbench.doctor.diagnose.Report``; ``inputs``: the arrays it was made
    from (``load_inputs`` keywords), for the frames plot of the first ``samples`` samples."""
    from ctcbench.doctor.findings import SEVERITIES
    from ctcbench.doctor.plot import plot_frames
    from ctcbench.plotting import written_uri
    findings = [{"code": f.code, "severity": f.severity, "message": f.message, "fix": f.fix,
                 "explains": list(f.explains),
                 "evidence": [(k, evidence_text(v)) for k, v in f.evidence.items()]}
                for f in result.findings]
    counts = {s: sum(f["severity"] == s for f in findings) for s in SEVERITIES}
    try:
        frames = written_uri(lambda path: plot_frames(path, **inputs, layout=layout,
                                                      samples=samples))
    except ValueError:  # inputs too broken to plot; the findings say why
        frames = None
    return {"source": source, "name": Path(source).name if source else "inputs",
            "summary": result.summary, "ok": result.ok, "worst": result.worst(),
            "findings": findings, "counts": counts, "frames": frames}
