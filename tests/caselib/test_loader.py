"""The one case loader and selector: the loss and the decoder case libraries find, read, check
and select their files alike, each with its own fields."""
from __future__ import annotations

import json
import tomllib

import pytest

from ctcbench.caselib.decoder_cases import load_decoder_cases, select_decoder_cases
from ctcbench.caselib.library import load_cases, select_cases

from conftest import MINIMAL_CASE

DECODER_CASE = """
[[case]]
name = "{name}"
description = "one sample"
provenance = "test"
[[case.sample]]
probs = [[0.6, 0.4], [0.6, 0.4]]
"""
LIBRARIES = {"loss": (load_cases, MINIMAL_CASE.replace("{oracle}", "brute_force"), "cases"),
             "decoder": (load_decoder_cases, DECODER_CASE, "decoder cases")}


def _write(folder, files: dict):
    folder.mkdir(exist_ok=True)
    for name, text in files.items():
        (folder / name).write_text(text)
    return folder


@pytest.mark.parametrize("library", LIBRARIES)
@pytest.mark.parametrize("files, message", [
    ({"a.toml": "CASE:x", "b.toml": "CASE:x"},
     "b.toml: case 'x': expected a unique name, got a duplicate of one in a.toml"),
    ({"a.toml": "CASE:-x"},
     "a.toml: case '-x' name: expected lower-case letters, digits, '_' or '-', got '-x'"),
    ({"a.toml": "CASE:Abc"}, "a.toml: case 'Abc' name: expected lower-case letters"),
    ({"a.json": '{"case": [1]}'}, "a.json: a case: expected a table, got int 1"),
    ({"a.toml": "CASE:x\nextra = 1"},
     "a.toml: case 'x': expected only the fields "),
    ({"a.toml": "[[case]\nname="}, "a.toml: expected valid TOML, got a parse error"),
    ({"a.toml": "title = 'none'\n"},
     "a.toml: expected a list of cases under the key 'case', got ['title']"),
])
def test_both_libraries_refuse_a_bad_file_alike(tmp_path, library, files, message):
    """Each error names the file, the case and the field, in the same words for both
    libraries (``CASE:name`` stands for a good case of that name, a line after it for a field
    added to it)."""
    load, case, _ = LIBRARIES[library]
    texts = {}
    for name, text in files.items():
        if text.startswith("CASE:"):
            case_name, _, extra = text[5:].partition("\n")
            text = case.format(name=case_name).replace('provenance = "test"\n',
                                                       f'provenance = "test"\n{extra}\n')
        texts[name] = text
    with pytest.raises(ValueError) as info:
        load([_write(tmp_path / "lib", texts)])
    assert message in str(info.value)


@pytest.mark.parametrize("library", LIBRARIES)
def test_both_libraries_refuse_a_missing_or_empty_folder(tmp_path, library):
    load, _, what = LIBRARIES[library]
    with pytest.raises(ValueError, match=f"^{what}: expected a folder of .toml/.json case "
                                         f"files, got {tmp_path / 'nope'}$"):
        load(str(tmp_path / "nope"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match=f"^{what}: expected a folder holding .toml or .json "
                                         "case files, got none in "):
        load([tmp_path / "empty"])


@pytest.mark.parametrize("library", LIBRARIES)
def test_both_libraries_read_toml_and_json_by_file_name_and_skip_the_data_files(tmp_path,
                                                                                library):
    """Files in name order, each a family; known_issues.toml and atlas.toml are not cases."""
    load, case, _ = LIBRARIES[library]
    raw = tomllib.loads(case.format(name="from_json"))
    folder = _write(tmp_path / "lib", {"b.toml": case.format(name="from_toml"),
                                       "a.json": json.dumps(raw),
                                       "known_issues.toml": "x = 1\n",
                                       "atlas.toml": "y = 2\n", "notes.txt": "z"})
    cases = load(folder)
    assert [(c.name, c.family, c.source) for c in cases] == [
        ("from_json", "a", "a.json"), ("from_toml", "b", "b.toml")]


def test_decoder_cases_are_selected_by_name_family_or_the_decoders_folder():
    """``decoders/family/name``, ``family/name`` or ``name``, in library order; a glob that
    matches none selects none (compare says what it expected of both libraries)."""
    cases = load_decoder_cases()
    edges = [c.name for c in cases if c.family == "edges"]
    assert [c.name for c in select_decoder_cases(cases, ["decoders/edges/*"])] == edges
    assert [c.name for c in select_decoder_cases(cases, ["edges/*"])] == edges
    picked = select_decoder_cases(cases, ["flat_frames", "decoders/repeats/repeat_*"])
    assert [c.name for c in picked] == [c.name for c in cases if c.name == "flat_frames"
                                        or c.name.startswith("repeat_") and c.family == "repeats"]
    assert select_decoder_cases(cases, ["publised/*"]) == []
    assert [c.name for c in select_decoder_cases(cases, None)] == [c.name for c in cases]


def test_a_loss_glob_matching_nothing_is_an_error_a_decoder_one_is_not():
    """The loss library refuses a glob that matches none (offering the closest name), the
    decoder library returns none: compare routes each glob to the library it matches."""
    cases = load_cases()
    with pytest.raises(ValueError, match=r"got 'tf_basc' \(did you mean 'tf_basic'\?\)"):
        select_cases(cases, "tf_basc")
    assert select_decoder_cases(load_decoder_cases(), ["tf_basic"]) == []
