"""Self-fuzz of decoder case files: every built-in decoder case, mutated field by field, loaded
by the decoder case library and made into the batch a decoder is given."""
from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings, strategies as st

from ctcbench.caselib.decoder_cases import load_decoder_cases

from selffuzz.strategies_files import kept, builtin_decoder_cases, mutated, to_json, to_toml

CASES = builtin_decoder_cases()


@settings(parent=settings.get_profile("ctcbench-selffuzz"))
@given(data=st.data(), index=st.integers(0, len(CASES) - 1),
       suffix=st.sampled_from([".toml", ".json"]), twice=st.sampled_from([False] * 3 + [True]))
def test_mutated_decoder_case_file(oracle, data, index, suffix, twice):
    """A mutated decoder case file loads into usable batches, or is one error in the form."""
    raw, mutations = data.draw(mutated(CASES[index][1]), label="mutated case")
    text = (to_toml if suffix == ".toml" else to_json)({"case": [raw, raw] if twice else [raw]})
    what = f"decoder case file {text[:2000]!r} after {mutations}"
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "fuzzed" + suffix).write_text(text, encoding="utf-8")
        try:
            with oracle.bounded(what=what):
                cases = load_decoder_cases(folder)
                for case in cases:
                    case.batch(), case.beam_width()
        except oracle.Finding:
            raise
        except Exception as exc:
            oracle.record("decoder case files", oracle.check_error(exc, what))
            return
    oracle.record("decoder case files", None)
    loose = [m for m in mutations if m.refusable]
    assert not loose or not any(kept(raw, m) for m in loose), f"{what}: a misspelt key was dropped: {loose}"
    assert not twice, f"{what}: a case name given twice was accepted"



def test_found_exact_beam_of_a_long_case(oracle):
    """A long case left at beam = "exact" is refused in the form (it raised OverflowError
    formatting a prefix count of thousands of digits)."""
    raw = dict(next(c for _, c in CASES if c.get("random", {}).get("T", 0) >= 1000))
    raw.pop("beam", None)
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "long.json").write_text(to_json({"case": [raw]}), encoding="utf-8")
        try:
            load_decoder_cases(folder)
        except ValueError as exc:
            line = oracle.check_error(exc, "long exact beam")
    assert "beam: expected an integer for a case this large" in line


def test_found_peaked_empty_target(oracle):
    """``[case.random]`` with ``peaked`` and ``L = 0`` plants a path of blanks (it raised
    NumPy's "high <= 0")."""
    raw = {"name": "x", "description": "d", "provenance": "p",
           "random": {"seed": 0, "N": 1, "T": 3, "C": 3, "peaked": 12.0, "L": 0}}
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "x.json").write_text(to_json({"case": [raw]}), encoding="utf-8")
        case, = load_decoder_cases(folder)
    assert case.labels == ((),) and case.samples[0].argmax(1).tolist() == [0, 0, 0]
