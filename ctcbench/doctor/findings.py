"""What the doctor reports: one :class:`Finding` per problem, ranked into a :class:`Report`.

Severities: ``error`` a mistake in the inputs (the loss or its gradient is wrong or
meaningless); ``warning`` the inputs are valid but the model is in a known bad state (the
blank plateau); ``info`` a convention worth knowing. Only errors make ``Report.ok`` false.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

SEVERITIES = ("error", "warning", "info")

# Causal order used to break ties in the ranking: earlier codes invalidate later checks.
CODES = ("layout", "onehot-targets", "targets-transposed", "lengths-swapped",
         "target-lengths-padded", "non-finite", "length-mismatch", "half-precision",
         "softmax-axis", "not-normalized", "probabilities-not-log", "argmax-outputs",
         "blank-index", "target-out-of-range", "target-contains-blank", "infeasible-target",
         "padded-frames-counted", "time-invariant", "blank-collapse", "reduction")
MAX_LISTED = 10  # samples listed in evidence


@dataclass
class Finding:
    """One diagnosed problem: a stable ``code``, a severity, what is wrong and how to fix it."""

    code: str
    severity: str
    message: str
    evidence: dict
    fix: str
    explains: list[str] = field(default_factory=list)


@dataclass
class Report:
    """All findings for one batch, ranked, plus what the doctor understood of the inputs."""

    findings: list[Finding]
    summary: dict

    @property
    def codes(self) -> list[str]:
        return [f.code for f in self.findings]

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def ok(self) -> bool:
        """True when nothing at error severity was found."""
        return not self.errors

    def worst(self) -> str | None:
        """The highest severity present, or None when there are no findings."""
        present = {f.severity for f in self.findings}
        return next((s for s in SEVERITIES if s in present), None)

    def to_dict(self) -> dict:
        return {"summary": self.summary, "ok": self.ok,
                "findings": [asdict(f) for f in self.findings]}

    def format_table(self) -> str:
        s = self.summary
        lines = [f"ctcbench doctor: T={s['T']} N={s['N']} C={s['C']} L={s['L']} "
                 f"input={s['kind']} ({s['dtype']}) blank={s['blank']} layout={s['layout']} "
                 f"reduction={s['reduction']}"]
        if all(f.severity == "info" for f in self.findings):
            lines.append("no problems found" + (" (notes below)" if self.findings else ""))
        for f in self.findings:
            lines.append("")
            lines.append(f"{f.severity.upper():<8}{f.code}: {f.message}")
            for key, value in f.evidence.items():
                lines.append(f"        {key} = {_short(value)}")
            lines.append(f"        fix: {f.fix}")
            if f.explains:
                lines.append(f"        explains: {', '.join(f.explains)}")
        counts = {sev: sum(f.severity == sev for f in self.findings) for sev in SEVERITIES}
        lines.append("")
        lines.append(", ".join(f"{n} {sev}{'s' if n != 1 else ''}" for sev, n in counts.items()))
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.format_table()

def rank(findings: list[Finding]) -> list[Finding]:
    """Findings by severity, then by how many others each explains, then in causal order."""
    return sorted(findings, key=lambda f: (SEVERITIES.index(f.severity), -len(f.explains),
                                           CODES.index(f.code)))


def _short(value) -> str:
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, list) and len(value) > MAX_LISTED:
        return repr(value[:MAX_LISTED])[:-1] + f", ... ({len(value)} in all)]"
    return repr(value)


def rounded(x: float, digits: int = 4) -> float:
    """A float for evidence: rounded, inf/nan kept."""
    x = float(x)
    return round(x, digits) if np.isfinite(x) else x
