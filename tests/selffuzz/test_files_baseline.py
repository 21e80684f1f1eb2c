"""Self-fuzz of ``compare --save-baseline`` files read back by ``--baseline``: a baseline
written by the real writer from the reference's results, mutated key by key, loaded and
compared with the run's rows."""
from __future__ import annotations

import json
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from ctcbench import CTCProblem
from ctcbench.compare.baseline import against_baseline, fingerprint, load_baseline, save_baseline
from ctcbench.runtime.registry import REFERENCE, get_backend

from selffuzz.strategies_files import kept, mutated


def _rows() -> list[dict]:
    rng = np.random.default_rng(0)
    problem = CTCProblem(rng.normal(size=(5, 2, 3)), [[1, 2], [2, 0]], [5, 4], [2, 1])
    result = get_backend(REFERENCE).run(problem)
    return [{"backend": "numpy", "case": c, "dtype": "float64",
             "fingerprint": fingerprint([problem], [result])} for c in ("a", "b")]


ROWS = _rows()
with tempfile.TemporaryDirectory() as _folder:
    save_baseline(ROWS, Path(_folder, "b.json"), backend_versions={"numpy": np.__version__})
    BASELINE = json.loads(Path(_folder, "b.json").read_text())


@settings(parent=settings.get_profile("ctcbench-selffuzz"))
@given(data=st.data(), max_change=st.sampled_from([0.0, 1e-9, 1.0]))
def test_mutated_baseline_file(oracle, data, max_change):
    """A mutated baseline is compared, or refused in one line naming --baseline and the key;
    a misspelt key is never dropped (a row's own key is data: an unknown row is said)."""
    raw, mutations = data.draw(mutated(BASELINE), label="mutated baseline")
    text = json.dumps(raw)
    what = f"--baseline {text!r} after {mutations}"
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "b.json")
        path.write_text(text, encoding="utf-8")
        try:
            with oracle.bounded(what=what):
                against_baseline(ROWS, load_baseline(path), max_change)
        except oracle.Finding:
            raise
        except Exception as exc:
            oracle.record("--baseline files", oracle.check_error(exc, what))
            return
    oracle.record("--baseline files", None)
    assert not [m for m in mutations if m.refusable and m.path not in (("rows",),
                                                                     ("backend_versions",))
                and kept(raw, m)], f"{what}: a misspelt or unknown key was dropped"


# inputs the fuzz found, each answered before with a bare KeyError or TypeError from deep in
# the comparison: (the baseline as written, what the one error line must say)
FOUND = {
    "no-rows": ({k: v for k, v in BASELINE.items() if k != "rows"},
                "rows: expected a table of fingerprints keyed 'BACKEND CASE DTYPE', got nothing"),
    "row-not-a-table": ({**BASELINE, "rows": {"numpy a float64": None}},
                        "expected a table with the keys grad, loss, problems, got None"),
    "text-loss": ({**BASELINE, "rows": {"numpy a float64": {"loss": "x", "grad": [],
                                                            "problems": "0"}}},
                  ".loss: expected a list of lists of numbers"),
    "misspelt-key": ({**BASELINE, "backend_version": {}}, "did you mean 'backend_versions'?"),
    "deep-json": ("[" * 100_000 + "]" * 100_000, "nested too deep to read"),
}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_found_baseline_file(oracle, name):
    """Each input the fuzz found is one error in the form, saying what was wrong."""
    data, said = FOUND[name]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder, "b.json")
        path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
        with pytest.raises(ValueError) as refused:
            against_baseline(ROWS, load_baseline(path), 0.0)
    assert said in oracle.check_error(refused.value, name)
