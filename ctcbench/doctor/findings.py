"""What the doctor reports: one :class:`Finding` per problem, ranked into a :class:`Report`.

Severities: ``error`` a mistake in the inputs (the loss or its gradient is wrong or
meaningless); ``warning`` the inputs are valid but the model is in a known bad state (the
blank plateau); ``info`` a convention worth knowing. Only errors make ``Report.ok`` false.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field
from enum import Flag, StrEnum, auto

import numpy as np

SEVERITIES = ("error", "warning", "info")


class Trait(Flag):
    """Groups of codes that the doctor and the monitor look for together."""

    FIT = auto()  # a length or label error: a correction (swapped lengths, ...) must clear all
    PLATEAU = auto()  # the model on the blank plateau: what the monitor's flat-loss event needs
    MODEL_STATE = auto()  # an error of the model, not the inputs: an untrained one shows it briefly


class Code(StrEnum):
    """Every finding code: its stable name (as printed and in JSON), its traits, and the atlas
    entries whose upstream bug its cause sets off. Declared in causal order, which breaks ties
    in the ranking: earlier codes make later checks meaningless."""

    def __new__(cls, value: str, traits: Trait = Trait(0), atlas: tuple[str, ...] = ()):
        member = str.__new__(cls, value)
        member._value_ = value
        member.traits, member.atlas = traits, atlas
        return member

    LAYOUT = "layout"
    ONEHOT_TARGETS = "onehot-targets"
    TARGETS_TRANSPOSED = "targets-transposed"
    LENGTHS_SWAPPED = "lengths-swapped"
    INPUT_LENGTHS_UNITS = "input-lengths-units"
    TARGET_LENGTHS_PADDED = "target-lengths-padded"
    NON_FINITE = "non-finite"
    LENGTH_MISMATCH = "length-mismatch", Trait.FIT
    HALF_PRECISION = "half-precision"
    SOFTMAX_AXIS = "softmax-axis"
    SIGMOID_OUTPUTS = "sigmoid-outputs"
    NOT_NORMALIZED = "not-normalized"
    PROBABILITIES_NOT_LOG = "probabilities-not-log"
    ARGMAX_OUTPUTS = "argmax-outputs"
    BLANK_INDEX = "blank-index"
    TARGET_OUT_OF_RANGE = "target-out-of-range", Trait.FIT, ("torch-oob-read-huge-label",)
    TARGET_CONTAINS_BLANK = "target-contains-blank", Trait.FIT, ("tf-label-equal-to-blank",)
    INFEASIBLE_TARGET = ("infeasible-target", Trait.FIT,
                         ("torch-nan-gradient-of-infinite-loss", "optax-infeasible-finite-loss",
                          "warpctc-infeasible-zero-loss"))
    PADDED_FRAMES_COUNTED = "padded-frames-counted"
    TIME_INVARIANT = "time-invariant", Trait.PLATEAU | Trait.MODEL_STATE
    BLANK_COLLAPSE = "blank-collapse", Trait.PLATEAU
    REDUCTION = "reduction"
    LAYOUT_AMBIGUOUS = "layout-ambiguous"  # a note: the shape and values cannot confirm it


CODES = tuple(Code)  # the priority order used to break ties in the ranking


def codes_with(trait: Trait) -> frozenset[Code]:
    """The codes that have ``trait``."""
    return frozenset(code for code in Code if trait in code.traits)


MAX_LISTED = 10  # samples listed in evidence


@dataclass
class Finding:
    """One diagnosed problem: a stable ``code``, a severity, what is wrong and how to fix it."""

    code: Code
    severity: str
    message: str
    evidence: dict
    fix: str
    explains: list[Code] = field(default_factory=list)

    def __post_init__(self):
        self.code = Code(self.code)  # an undeclared code fails here, where the check makes it


@dataclass
class Report:
    """All findings for one batch, ranked, plus what the doctor understood of the inputs."""

    findings: list[Finding]
    summary: dict

    @property
    def codes(self) -> list[str]:
        """The codes in rank order, as plain strings (for tables and files)."""
        return [f.code.value for f in self.findings]

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
        quiet = all(f.severity == "info" for f in self.findings)
        if quiet and any(f.code == Code.LAYOUT_AMBIGUOUS for f in self.findings):
            lines.append(f"no problems found if the values are {s['layout']}, which this batch "
                         "cannot confirm (see layout-ambiguous below)")
        elif quiet:
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
