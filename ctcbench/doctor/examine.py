"""``examine``: what ``ctcbench doctor FILE`` does, as a library function: the file read, the
batch diagnosed (or scored under each convention), and which torch path it would take."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from ctcbench.doctor.config import DEFAULTS, conflict
from ctcbench.errors import InputError
from ctcbench.files import to_json


@dataclass
class Examination:
    """``result``: the diagnosis (or the perfect-vs-blank explanation); ``inputs``: the arrays
    read from the file (``load_inputs`` keywords), the values in the order of axes the doctor
    read them in; ``path``: the torch path report or None."""

    result: object
    inputs: dict
    path: object = None

    def to_json(self) -> str:
        extra = {"torch_path": self.path.to_dict()} if self.path is not None else {}
        return to_json(dict(self.result.to_dict(), **extra), indent=2)

    def format_table(self) -> str:
        tail = f"\n\n{self.path.format_table()}" if self.path is not None else ""
        return self.result.format_table() + tail


def examine(file, *, blank=DEFAULTS.blank, layout: str = DEFAULTS.layout,
            reduction: str = DEFAULTS.reduction, explain: bool = DEFAULTS.explain,
            device: str | None = DEFAULTS.device, max_bytes: int = DEFAULTS.max_bytes
            ) -> Examination:
    """Read ``file`` (.npz or .pt, refused past ``max_bytes``) and diagnose it; ``explain``
    scores all-blank and perfect predictions instead; ``device`` also says which torch path
    the batch takes there. ``blank`` overrides the file's."""
    from ctcbench.doctor.load import load_inputs
    problem = conflict({"explain": explain, "device": device})
    if problem:
        raise ValueError(problem)
    inputs = load_inputs(file, max_bytes=max_bytes)
    if blank is not None:
        inputs["blank"] = blank
    try:
        if explain:
            from ctcbench.doctor.explain import explain_perfect_vs_blank
            result = explain_perfect_vs_blank(**inputs, layout=layout)
        else:
            from ctcbench.doctor.diagnose import diagnose
            result = diagnose(**inputs, layout=layout, reduction=reduction)
            inputs = _as_read(inputs, result)
    except InputError as refused:  # an array of the file: said as "FILE: key: ..."; a
        # blank given as the argument (--blank) keeps its own name
        if refused.name not in inputs or (refused.name == "blank" and blank is not None):
            raise
        raise InputError(f"{Path(file).name}: {refused.name}", refused.problem) from None
    path = None
    if device:
        from ctcbench.doctor.torch_path import torch_path
        path = torch_path(**inputs, layout=layout, device=device)
    return Examination(result, inputs, path)


def _as_read(inputs: dict, report) -> dict:
    """``inputs`` with the values' axes in the order the diagnosis read them in (its ``layout``
    finding's ``permute``, when it reordered them), so the plot and the page show frames."""
    import numpy as np

    from ctcbench.doctor.findings import Code
    from ctcbench.doctor.load import VALUE_KEYS
    cause = next((f for f in report.findings
                  if f.code == Code.LAYOUT and "axes_as_given" in f.evidence), None)
    if cause is None:
        return inputs
    key = next(k for k in VALUE_KEYS if k in inputs)
    return {**inputs, key: np.transpose(np.asarray(inputs[key]), cause.evidence["permute"])}

