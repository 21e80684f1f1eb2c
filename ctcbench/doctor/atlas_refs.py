"""Where a doctor finding, or a torch path's condition, matches a known upstream CTC bug: its
entry in the atlas (``cases/atlas.toml``, read through :mod:`ctcbench.caselib.known`)."""
from __future__ import annotations

from ctcbench.caselib.known import load_atlas

# torch path condition name -> the atlas entry of the bug met when it is broken on cuDNN
CONDITIONS = {
    "target lengths": "torch-cudnn-target-length-256",
    "target vs input length": "torch-cudnn-illegal-memory-infeasible",
}


def atlas_ref(entry_id: str) -> dict | None:
    """``{"id", "url", "implementation"}`` of the built-in atlas entry ``entry_id``, or None."""
    for entry in load_atlas():
        if entry.id == entry_id:
            return {"id": entry.id, "url": entry.url, "implementation": entry.implementation}
    return None


def cite(ids) -> str:
    """``ids`` as text for a fix: "atlas entry ID (URL)", joined."""
    refs = [r for r in map(atlas_ref, ids) if r is not None]
    return "; ".join(f"atlas entry {r['id']}" + (f" ({r['url']})" if r["url"] else "")
                     for r in refs)


def cite_findings(findings) -> None:
    """Name, in each finding's evidence and fix, the atlas entries its cause matches (the
    ``atlas`` of its :class:`~ctcbench.doctor.findings.Code`)."""
    for finding in findings:
        refs = [r for r in map(atlas_ref, finding.code.atlas) if r is not None]
        if not refs:
            continue
        finding.evidence["atlas"] = [r["id"] for r in refs]
        finding.fix += f" Known upstream: {cite(r['id'] for r in refs)}."
