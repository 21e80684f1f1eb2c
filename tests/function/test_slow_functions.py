"""``compare --function`` on a slow function: its long case predicted from its short ones and
skipped, not waited for. The oracles: the function's own time on that case, measured here in
this process, and the growth it was written with (an O(T²) backward, slow_losses.py); the
uniform cases' closed-form losses check that what did run is right."""
import json
import re
import time
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from ctcbench.caselib.builders import to_problem, variants
from ctcbench.caselib.library import load_cases
from ctcbench.cli import cli
from ctcbench.runtime.registry import unregister_backend

HERE = Path(__file__).parent
SHORT, LONG = (24, 32, 48, 64, 96, 128), 384  # frames: the long case costs ~9x the longest
# short one, which is long enough (~0.3 s) that a loaded machine's jitter does not hide its growth


@pytest.fixture
def uniform_cases(tmp_path, monkeypatch):
    """A case file of one-sample uniform problems, one per length in SHORT and LONG, in a
    folder; run beside slow_losses.py, as a user runs ctcbench beside their module."""
    monkeypatch.chdir(HERE)
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    folder = tmp_path / "cases"
    folder.mkdir()
    (folder / "lengths.toml").write_text("\n".join(
        f'[[case]]\nname = "uniform_t{T}"\ndescription = "uniform, T={T}"\n'
        f'provenance = "closed form"\n[case.build]\ngenerator = "uniform"\nseed = {T}\nC = 5\n'
        f'[[case.build.sample]]\nL = 3\nT = {T}\n[case.expect]\noracle = "uniform"\n'
        for T in (*SHORT, LONG)))
    yield folder
    for name in ("slow_losses:ctc_loss", "faulty_losses:ctc_loss"):
        try:
            unregister_backend(name)
        except KeyError:
            pass


def compare(cases, function, *args):
    res = CliRunner().invoke(cli, ["compare", "--function", function, "--convention", "numpy",
                                   "--cases", str(cases), "--dtype", "float64", "--no-plot",
                                   "--out", str(cases.parent / function.replace(":", "-")),
                                   "--format", "json", *args])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def seconds_of(case_dir, name) -> float:
    """slow_losses.ctc_loss's own time on the case ``name``, called here, best of one."""
    from slow_losses import ctc_loss
    case = next(c for c in load_cases([case_dir]) if c.name == name)
    problem = to_problem(variants(case.build, case.variants, case=name)[0].raw, "float64")
    start = time.perf_counter()
    ctc_loss(np.array(problem.logits), problem.targets, problem.input_lengths,
             problem.target_lengths)
    return time.perf_counter() - start


def test_a_slow_functions_long_case_is_skipped_with_its_predicted_growth(uniform_cases):
    """The limit sits between the longest short case and the long one, as this machine runs
    them: the long case measured here, less 3 times (the longest short is ~9x less)."""
    measured = seconds_of(uniform_cases, f"uniform_t{LONG}")
    out = compare(uniform_cases, "slow_losses:ctc_loss", "--predict-limit", f"{measured / 3:.3g}")
    rows = {r["case"]: r for r in out["rows"]}
    assert all(rows[f"uniform_t{T}"]["status"] == "ok" for T in SHORT), rows
    long = rows[f"uniform_t{LONG}"]
    assert long["status"] == "skipped", long
    found = re.search(r"(O\(\S+\)): ([\d.]+) s predicted at T=(\d+) from", long["reason"])
    assert found, long["reason"]
    growth, predicted, at = found.group(1), float(found.group(2)), int(found.group(3))
    assert growth == "O(T²)" and at == LONG, long["reason"]
    assert measured / 3 <= predicted <= measured * 3, (predicted, measured)
    said = [line for line in out["summary"]["slow"] if "slow_losses:ctc_loss" in line]
    assert len(said) == 1 and f"uniform_t{LONG}" in said[0] and "--predict-limit 0" in said[0]


def test_a_fast_function_runs_every_case(uniform_cases):
    """A right NumPy loss of O(T) cost (~0.15 s on the long case): nothing is predicted past
    a second, where the slow one's long case is."""
    out = compare(uniform_cases, "faulty_losses:ctc_loss", "--predict-limit", "1")
    statuses = {r["case"]: r["status"] for r in out["rows"]}
    assert statuses == {f"uniform_t{T}": "ok" for T in (*SHORT, LONG)}
    assert out["summary"]["slow"] == []
