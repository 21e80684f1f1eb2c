"""The atlas (cases/atlas.toml): its entries are sourced and consistent with the library and
the known issues, a malformed file is one error, and the entries that reproduce on this
stack are run."""
from __future__ import annotations

import json

import pytest

from ctcbench.atlas.run import atlas
from ctcbench.caselib.known import load_atlas, load_known_issues, parse_atlas
from ctcbench.caselib.library import load_cases
from ctcbench.runtime.registry import BUILTIN_BACKENDS, get_backend
from ctcbench.runtime.protocol import BackendUnavailable

ENTRIES = load_atlas()
CASES = {c.name: c for c in load_cases()}


def test_at_least_25_entries_each_with_its_source():
    """25 or more entries; each names a source, and a URL where one is cited upstream."""
    assert len(ENTRIES) >= 25
    for e in ENTRIES:
        assert e.source and e.problem and e.implementation, e.id
        assert e.url or "measured by ctcbench" in e.source, e.id
    assert sum(e.url is not None for e in ENTRIES) >= 20


def test_tryable_entries_name_a_builtin_backend_and_a_case_in_its_dtype():
    """backend/case/dtype name a built-in backend and a library case run in that dtype."""
    for e in (e for e in ENTRIES if e.tryable):
        assert e.backend in BUILTIN_BACKENDS, e.id
        assert e.case in CASES and e.dtype in CASES[e.case].dtypes, e.id
        assert (e.device == "gpu") == e.backend.startswith("torch-cu"), e.id


def test_known_issues_point_into_the_atlas_and_cover_its_cpu_rows():
    """Every known issue's atlas id exists; every CPU entry with a case is a known issue of
    that row, so compare's gate stays green while the bug reproduces."""
    ids = {e.id for e in ENTRIES}
    issues = load_known_issues()
    assert {i.atlas for i in issues if i.atlas} <= ids
    for e in (e for e in ENTRIES if e.tryable and e.device == "cpu"):
        assert any(i.matches(e.backend, e.case, e.dtype) and i.atlas == e.id
                   for i in issues), e.id


@pytest.mark.parametrize("text, message", [
    ('format = 1\n[[entry]]\nid = "a"\nimplementation = "x"\nproblem = "p"\ndevice = "tpu"\n'
     'source = "s"\n', "atlas.toml: entry[0].device: expected one of cpu, gpu, got 'tpu'"),
    ('format = 1\n[[entry]]\nid = "a"\nimplementation = "x"\nproblem = "p"\ndevice = "cpu"\n'
     'source = "s"\ncase = "tf_basic"\n',
     "atlas.toml: entry[0]: expected all of backend, case, dtype or none, got only case"),
    ('format = 1\n[[entry]]\nid = "a"\nimplementation = "x"\nproblem = "p"\ndevice = "cpu"\n'
     'source = "s"\nurl = "github.com/x"\n',
     "atlas.toml: entry[0].url: expected an https:// address, got 'github.com/x'"),
])
def test_a_malformed_atlas_is_one_error_naming_the_field(text, message):
    with pytest.raises(ValueError) as err:
        parse_atlas(text, "atlas.toml")
    assert str(err.value) == message


def test_entries_that_reproduce_here_are_run(tmp_path, monkeypatch):
    """Each CPU entry with a case, on a backend installed here, reproduces (its compare row
    fails as the known issue says); GPU entries without a GPU cannot be tried. Entries on
    the long cases (a minute of TF's dense path) are left to compare's gate in CI."""
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    cpu = {e.backend for e in ENTRIES if e.tryable and e.device == "cpu"
           and not e.case.endswith("_long")}
    here = []
    for name in sorted(cpu):
        try:
            get_backend(name).close()
            here.append(name)
        except BackendUnavailable:
            pass
    if not here:
        pytest.skip("no third-party backend installed")
    result = atlas(here + ["torch-cuda"], out=tmp_path / "run")
    rows = {r["id"]: r for r in json.loads((tmp_path / "run" / "rows.json").read_text())}
    assert len(rows) == len(ENTRIES)
    for e in ENTRIES:
        if e.tryable and e.backend in here and e.device == "cpu" and not e.case.endswith("_long"):
            assert rows[e.id]["status"] == "reproduces", (e.id, rows[e.id]["reason"])
    if rows["torch-cuda-gradient-long-targets"]["status"] == "cannot try":
        assert "skipped" in rows["torch-cuda-gradient-long-targets"]["reason"]
    assert result.summary["entries"] == len(ENTRIES)
