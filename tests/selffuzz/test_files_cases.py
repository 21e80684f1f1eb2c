"""Self-fuzz of case files: every built-in loss case, mutated field by field, read and built by
``ctcbench cases --cases DIR`` exactly as ``compare`` builds it."""
from __future__ import annotations

import difflib
import tempfile
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given, settings, strategies as st

from ctcbench.caselib.expect_spec import _KEYS as EXPECT_KEYS
from ctcbench.cli import cli

from selffuzz.strategies_files import builtin_cases, kept, mutated, to_json, to_toml

CASES = builtin_cases()


def _free_form(raw: dict, m) -> bool:
    """Where the format lets a key through: notes in a format-1 ``[case.expect]`` (published
    alpha tables), but not one a letter away from a key it checks."""
    return (m.path == ("expect",) and raw.get("format", 1) == 1
            and not difflib.get_close_matches(m.key, EXPECT_KEYS, n=1))


def judge_case_file(oracle, raw: dict, mutations, *, suffix: str, twice: bool) -> None:
    """Write ``raw`` (and a copy of it when ``twice``) as a case file and list it."""
    text = (to_toml if suffix == ".toml" else to_json)({"case": [raw, raw] if twice else [raw]})
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "fuzzed" + suffix).write_text(text, encoding="utf-8")
        what = f"case file {text[:2000]!r} after {mutations}"
        with oracle.bounded(what=what):
            result = CliRunner().invoke(cli, ["cases", "--cases", folder, "--format", "json"])
    line = oracle.check_cli(result, what, ok=(0,))
    oracle.record("case files", line)
    if line is None:
        loose = [m for m in mutations if m.refusable and kept(raw, m)
                 and not _free_form(raw, m)]
        assert not loose, f"{what}: a misspelt or unknown key was silently dropped: {loose}"
        assert not twice, f"{what}: a case name given twice was accepted"


@settings(parent=settings.get_profile("ctcbench-selffuzz"))
@given(data=st.data(), index=st.integers(0, len(CASES) - 1),
       suffix=st.sampled_from([".toml", ".json"]), twice=st.sampled_from([False, False, False, True]))
def test_mutated_case_file(oracle, data, index, suffix, twice):
    """A mutated case file is listed, or refused in one line naming the file, case and field."""
    family, raw = CASES[index]
    raw, mutations = data.draw(mutated(raw), label="mutated case")
    judge_case_file(oracle, raw, mutations, suffix=suffix, twice=twice)


CASE = """[[case]]
name = "x"
description = "one sample"
provenance = "test"
format = 2
[case.build]
{build}
[case.expect]
{expect}
"""
RANDOM = 'generator = "random"\nC = 3\nsample = [{target = [1], T = 2}]'
ARRAYS = ('generator = "arrays"\nshape = [2, 1, 3]\ninput_lengths = [2]\ntarget_lengths = [1]\n'
          'targets = {targets}')
# inputs the fuzz found, each answered before with a traceback, a library's words or silence:
# (file suffix, text, what the one error line must say)
FOUND = {
    "misspelt-build-key": (".toml", CASE.format(build=RANDOM + "\nseeed = 3",
                                                expect='oracle = "brute_force"'),
                           "build: expected keys among", "did you mean 'seed'?"),
    "misspelt-sample-key": (".toml", CASE.format(build=RANDOM.replace("T = 2", "T = 2, nmae = 'a'"),
                                                 expect='oracle = "brute_force"'),
                            "build.sample[0]: expected keys among", "did you mean 'name'?"),
    "misspelt-variant-key": (".toml", CASE.format(build=RANDOM, expect='oracle = "brute_force"')
                             + '[[case.variant]]\ntransform = "wide_padding"\nextar = 3\n',
                             "variant[0]: expected keys among", "did you mean 'extra'?"),
    "misspelt-expect-key-format-1": (".toml", CASE.replace("format = 2\n", "").format(
        build=RANDOM, expect='oracle = "brute_force"\ngard = [[0.0]]'),
        "expect.gard: expected a note beside the keys", "a letter or two from 'grad'"),
    "ragged-arrays": (".toml", CASE.format(build=ARRAYS.format(targets="[[1], [1, 2]]"),
                                           expect='error = {type = "ValueError"}'),
                      "build.targets: expected a number or a rectangular nested list",
                      "rows of different shapes"),
    "float-target-arrays": (".toml", CASE.format(build=ARRAYS.format(targets="[[1.5]]"),
                                                 expect='error = {type = "ValueError"}'),
                            "build.targets: expected a number or a rectangular nested list of "
                            "integers", "1.5"),
    "published-loss-text": (".toml", CASE.format(build=RANDOM, expect='oracle = "published"\n'
                                                 'loss = ["x"]'), "expect.loss: expected", "'x'"),
    "single-path-oracle": (".toml", CASE.format(build=RANDOM, expect='oracle = "single_path"'),
                           "sample 0: expected input length", "(oracle single_path), got 2"),
    "deep-json": (".json", '{"case": ' + "[" * 100_000 + "]" * 100_000 + "}",
                  "fuzzed.json: expected valid JSON", "nested too deep"),
    "long-number": (".json", '{"case": [' + "9" * 5000 + "]}", "fuzzed.json: expected valid JSON",
                    "a number longer than"),
}


@pytest.mark.parametrize("name", sorted(FOUND))
def test_found_case_file(oracle, name):
    """Each input the fuzz found is one error line in the form, saying what was wrong."""
    suffix, text, *said = FOUND[name]
    with tempfile.TemporaryDirectory() as folder:
        Path(folder, "fuzzed" + suffix).write_text(text, encoding="utf-8")
        result = CliRunner().invoke(cli, ["cases", "--cases", folder])
    line = oracle.check_cli(result, name, ok=())
    assert all(s in line for s in said), line
