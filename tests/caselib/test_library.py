"""The case library: the built-in files load, cover the required families, and bad files fail clearly."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.caselib.library import DEFAULT_TOLERANCES, load_cases, select_cases

from conftest import MINIMAL_CASE as MINIMAL


@pytest.fixture(scope="module")
def library():
    return load_cases()


def test_builtin_library_is_found_and_large_enough(library):
    """The installed package finds its own case files and ships at least 25 unique cases."""
    names = [c.name for c in library]
    assert len(names) >= 25 and len(set(names)) == len(names)
    assert {c.family for c in library} >= {"published", "blank_vs_perfect", "alignment",
                                          "uniform", "invariance", "stress"}


def test_every_case_has_provenance_description_and_known_answer(library):
    """No case without a one-line description, a provenance and an oracle; the peers' suites
    (cases/peers/) may also check against the reference, differences or an expected error."""
    for case in library:
        assert case.description and "\n" not in case.description, case.name
        assert case.provenance, case.name
        allowed = {"published", "brute_force", "single_path", "empty_target", "uniform"}
        if case.folder == "peers":
            allowed |= {"reference", "finite_difference", None}
            assert " @ " in case.provenance, case.name  # repository path @ commit
        assert case.expect.get("oracle") in allowed, case.name


def test_required_coverage(library):
    """The issue's list: published values, orderings, invariances, stress sizes and dtypes."""
    by = {c.name: c for c in library}
    assert by["tf_basic"].expect["loss"] == [3.34211, 5.42262]
    assert by["warpctc_small"].expect["loss"] == [pytest.approx(2.462858, abs=1e-6)]
    assert "alpha" in by["toy_alpha_beta"].expect and "beta" in by["toy_alpha_beta"].expect
    assert sum(bool(c.ordering) for c in library) >= 3
    transforms = {v["transform"] for c in library for v in c.variants}
    assert transforms >= {"move_blank", "concatenated_targets", "index_dtype", "padded_frames",
                          "upstream_weights"}
    assert any(c.build.get("C") == 5000 for c in library)
    assert any("float16" in c.dtypes for c in library)
    assert any("bfloat16" in c.dtypes for c in library)


def test_select_by_glob_and_family(library):
    """Globs match names or family/name, keep library order, and reject a glob matching nothing."""
    picked = select_cases(library, ["uniform/*", "published/tf_*"])
    assert [c.name for c in picked][0] == "tf_basic" or "tf_basic" in [c.name for c in picked]
    assert {c.family for c in picked} == {"uniform", "published"}
    with pytest.raises(ValueError, match="case: expected a name or glob matching at least one"):
        select_cases(library, ["no_such_case*"])


def test_a_glob_matching_nothing_offers_the_families_and_the_closest_one(library):
    """A misspelt family gets the families (not ~100 names) and the glob it likely meant."""
    with pytest.raises(ValueError) as info:
        select_cases(library, ["publised/*"])
    message = str(info.value)
    families = sorted({c.family for c in library})
    assert f"the families {', '.join(families)}, got 'publised/*'" in message
    assert message.endswith("(did you mean 'published/*'?)")
    assert "tf_basic" not in message and len(message) < 400
    with pytest.raises(ValueError, match=r"got 'tf_basc' \(did you mean 'tf_basic'\?\)"):
        select_cases(library, "tf_basc")


def test_user_folder_toml_and_json(tmp_path):
    """--cases DIR loads the user's TOML and JSON files instead of the built-in library."""
    (tmp_path / "mine.toml").write_text(MINIMAL.format(name="mine_one", oracle="brute_force"))
    (tmp_path / "other.json").write_text(json.dumps({"case": [{
        "name": "json_one", "description": "d", "provenance": "p",
        "build": {"generator": "uniform", "C": 4, "sample": [{"target": [1, 1], "T": 5}]},
        "expect": {"oracle": "uniform"}, "tolerance": {"float32": {"grad_atol": 1e-3}}}]}))
    cases = load_cases([tmp_path])
    assert [c.name for c in cases] == ["mine_one", "json_one"]
    assert cases[1].tolerance("float32").grad_atol == 1e-3
    assert cases[1].tolerance("float32").loss_rtol == DEFAULT_TOLERANCES["float32"].loss_rtol


@pytest.mark.parametrize("text, message", [
    (MINIMAL.format(name="x", oracle="magic"), "expect.oracle: expected one of"),
    (MINIMAL.format(name="Bad Name", oracle="brute_force"), "name: expected lower-case"),
    (MINIMAL.format(name="x", oracle="brute_force").replace('provenance = "test"', ""),
     "provenance: expected a non-empty string"),
    (MINIMAL.format(name="x", oracle="brute_force").replace('"random"', '"gaussian"'),
     "build.generator: expected one of"),
    (MINIMAL.format(name="x", oracle="brute_force").replace(
        'provenance = "test"', 'provenance = "test"\ndtypes = ["float8"]'),
     "dtypes: expected a list"),
    ("[[case]\nname=", "expected valid TOML"),
    ("title = 'no cases'\n", "expected a list of cases under the key 'case'"),
    (MINIMAL.format(name="x", oracle="brute_force") * 2, "expected a unique name"),
    (MINIMAL.format(name="x", oracle="brute_force").replace(
        'provenance = "test"', 'provenance = "test"\nordering = ["a", "b"]'),
     "ordering: expected two or more sample names"),
])
def test_bad_case_files_name_file_case_and_field(tmp_path, text, message):
    """A broken user file is a one-line ValueError naming what was expected, not a traceback."""
    (tmp_path / "broken.toml").write_text(text)
    with pytest.raises(ValueError, match=message) as info:
        load_cases([tmp_path])
    assert "broken.toml" in str(info.value) or "case" in str(info.value)


def test_missing_folder_is_a_clear_error(tmp_path):
    """A --cases path that is not a folder of case files says so."""
    with pytest.raises(ValueError, match="cases: expected a folder"):
        load_cases([tmp_path / "nope"])
    with pytest.raises(ValueError, match="holding .toml or .json"):
        load_cases([tmp_path])


@pytest.mark.parametrize("file, text, message", [
    ("bad.json", '{"case": [1]}', "bad.json: a case: expected a table, got int 1"),
    ("bad.toml", MINIMAL.format(name="x", oracle="brute_force").replace(
        'provenance = "test"', 'provenance = "test"\ntolerance = "tight"'),
     "bad.toml: case 'x' tolerance: expected tables named after dtypes"),
    ("bad.toml", MINIMAL.format(name="x", oracle="brute_force")
     + '[case.tolerance.float32]\ngrad_atol = "abc"\n',
     "bad.toml: case 'x' tolerance.float32.grad_atol: expected a finite non-negative number, got 'abc'"),
    ("bad.toml", MINIMAL.format(name="x", oracle="brute_force")
     + '[case.tolerance.float32]\nloss_rtol = -1\n',
     "bad.toml: case 'x' tolerance.float32.loss_rtol: expected a finite non-negative number"),
    ("bad.toml", MINIMAL.format(name="x", oracle="brute_force").replace(
        'provenance = "test"', 'provenance = "test"\ndtypes = "float32"'),
     "bad.toml: case 'x' dtypes: expected a list"),
    ("bad.json", json.dumps({"case": [{"name": "x", "description": "d", "provenance": "p",
                                       "build": {"generator": "random", "sample": [3]},
                                       "expect": {"oracle": "brute_force"}}]}),
     "bad.json: case 'x' build.sample: expected a non-empty list of sample tables"),
])
def test_wrongly_typed_fields_fail_at_load_time(tmp_path, file, text, message):
    """Fields of the wrong type are one `Error:` line naming file, case and field, from both
    `cases` and `compare`, before any backend runs."""
    (tmp_path / file).write_text(text)
    for args in (["cases"], ["compare", "--backend", "numpy", "--no-plot",
                             "--out", str(tmp_path / "run")]):
        res = CliRunner().invoke(cli, [*args, "--cases", str(tmp_path)])
        assert res.exit_code == 1 and "Traceback" not in res.output, res.output
        assert f"Error: {message}" in res.output
    assert not (tmp_path / "run").exists()


def test_select_by_folder_glob(library):
    """A glob over folder/family/name picks the peers' suites in cases/peers/ and nothing else."""
    picked = select_cases(library, ["peers/*"])
    assert picked and all(c.folder == "peers" for c in picked)
    assert {c.family for c in picked} >= {"pytorch", "optax", "flashlight"}
    assert len(picked) == sum(c.folder == "peers" for c in library)
    assert [c.family for c in select_cases(library, ["peers/optax/*"])] == ["optax"] * 3
