"""ctcbench.datasheet.sheet's exports: datasheet.md names where it was measured."""
from __future__ import annotations

from ctcbench.datasheet.sheet import markdown


def test_datasheet_markdown_names_the_cpu_in_one_line():
    """datasheet.md says where it was measured with the CPU line, and for an older run's
    environment with its model and count."""
    detail = {"vendor": "AuthenticAMD", "model_name": "AMD EPYC 7B13", "logical_cpus": 8}
    config = {"backends": ["numpy"]}
    new = markdown({}, {"environment": {"cpu": "x", "cpu_detail": detail}, "config": config})
    old = markdown({}, {"environment": {"cpu": "AMD EPYC", "cpu_count": 8}, "config": config})
    assert " on AuthenticAMD AMD EPYC 7B13 (8 CPUs), ctcbench at" in new
    assert " on AMD EPYC (8 CPUs), ctcbench at" in old
