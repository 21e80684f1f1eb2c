"""The known-issues table: every issue loads and names a registered backend and real cases,
a row matches on backend, case glob and dtype glob, and a malformed file is one error."""
from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

from ctcbench.caselib.known import KnownIssue, known_issue, load_known_issues
from ctcbench.caselib.library import load_cases
from ctcbench.runtime.registry import BUILTIN_BACKENDS
from ctcbench.runtime.decoders import BUILTIN_DECODERS, DecoderTraits
from ctcbench.runtime.factory import load_factory
from ctcbench.caselib.decoder_cases import load_decoder_cases

TABLE = Path(__file__).resolve().parents[2] / "cases" / "known_issues.toml"

ONE = """format = 1
[[issue]]
backend = "tf"
cases = ["tf_basic"]
dtypes = ["float32"]
reason = "off by one"
seen_with = "tensorflow-cpu 2.21"
"""


@pytest.fixture(scope="module")
def library():
    return load_cases()


@pytest.fixture(scope="module")
def issues():
    return load_known_issues()


def _load(tmp_path, text: str, name: str = "known.toml"):
    path = tmp_path / name
    path.write_text(text)
    return load_known_issues(path)


def test_every_issue_of_the_file_loads(issues):
    """The installed table is the repository's file, one issue per [[issue]], in its order."""
    raw = tomllib.loads(TABLE.read_text())["issue"]
    assert len(issues) == len(raw) > 0
    assert [(i.backend, list(i.cases), i.reason) for i in issues] \
        == [(r["backend"], r["cases"], r["reason"]) for r in raw]
    assert load_known_issues(TABLE) == issues


def test_every_backend_is_a_builtin_one(issues):
    """Each issue names a backend or decoder of the built-in tables (plugins declare their
    own)."""
    unknown = {i.backend for i in issues} - set(BUILTIN_BACKENDS) - set(BUILTIN_DECODERS)
    assert not unknown, unknown


def test_every_case_glob_matches_a_case_of_the_library_in_a_listed_dtype(issues, library):
    """No issue is dead: each case glob matches a library case that runs in one of the
    issue's dtypes (a renamed case would leave its issue behind)."""
    dead = [f"{i.backend}: {glob} / {i.dtypes}" for i in issues for glob in i.cases
            if i.backend not in BUILTIN_DECODERS and not any(
                fnmatch.fnmatchcase(c.name, glob)
                and any(i.matches(i.backend, c.name, d) for d in c.dtypes) for c in library)]
    decoder_cases = [c.name for c in load_decoder_cases()]
    for i in (i for i in issues if i.backend in BUILTIN_DECODERS):  # the decoder's own dtype
        dtype = DecoderTraits.of(load_factory(BUILTIN_DECODERS[i.backend])).dtype
        dead += [f"{i.backend}: {glob} / {i.dtypes}" for glob in i.cases
                 if not fnmatch.filter(decoder_cases, glob)
                 or not any(fnmatch.fnmatchcase(dtype, d) for d in i.dtypes)]
    assert not dead, dead


def _claims(issues, library):
    """Each (backend, case, dtype) row of the library an issue matches, with those issues."""
    claimed = {}
    for issue in issues:
        for c in library:
            for d in c.dtypes:
                if issue.matches(issue.backend, c.name, d):
                    claimed.setdefault((issue.backend, c.name, d), []).append(issue)
    return claimed


def test_no_row_is_claimed_by_two_issues_of_one_backend(issues, library):
    """Each (backend, case, dtype) of the library has at most one reason."""
    twice = {k: [i.reason for i in v] for k, v in _claims(issues, library).items()
             if len(v) > 1}
    assert not twice, twice


def test_known_issue_finds_the_issue_of_each_row_it_claims(issues, library):
    """The lookup compare uses gives each claimed row its issue, and none to the same case
    and dtype on a backend that no issue names."""
    claimed = _claims(issues, library)
    assert claimed
    for (backend, case, dtype), (issue,) in claimed.items():
        assert known_issue(backend, case, dtype) is issue
        assert known_issue("no-such-backend", case, dtype) is None


def test_the_file_is_not_read_as_cases(library, tmp_path):
    """The table lives beside the case files but holds no cases, there or in a user folder."""
    assert not {c.source for c in library} & {TABLE.name}
    (tmp_path / TABLE.name).write_text(ONE)
    (tmp_path / "mine.toml").write_text((TABLE.parent / "published.toml").read_text())
    assert {c.source for c in load_cases(tmp_path)} == {"mine.toml"}


def test_a_row_matches_on_backend_case_glob_and_dtype_glob_together(tmp_path):
    """The backend name must be equal (not a prefix); a case glob and a dtype glob must both
    match; the first matching issue gives the reason."""
    table = _load(tmp_path, ONE.replace('cases = ["tf_basic"]', 'cases = ["tf_*", "x"]')
                  .replace('dtypes = ["float32"]', 'dtypes = ["float*"]')
                  + ONE[len("format = 1\n"):].replace("off by one", "second"))
    first = table[0]
    assert known_issue("tf", "tf_basic", "float64", table) is first
    assert known_issue("tf", "x", "float16", table) is first
    assert known_issue("tf", "tf_basic", "float32", table) is first  # not the second issue
    for row in [("tf-dense", "tf_basic", "float32"), ("t", "tf_basic", "float32"),
                ("tf", "basic", "float32"), ("tf", "tf_basic", "bfloat16")]:
        assert known_issue(*row, table) is None, row


BAD = [
    ("format = 1\n[[issue]\n", "known.toml: expected valid TOML, got a parse error: "),
    ("format = 2\n" + ONE[len("format = 1\n"):], "known.toml: format: expected one of 1, got 2"),
    ("format = 1\n", "known.toml: issue: expected a list of [[issue]] tables, got none"),
    ("format = 1\nissues = []\n", "known.toml: expected the keys format and issue, got 'issues'"),
    (ONE.replace('backend = "tf"\n', ""),
     "known.toml: issue[0]: expected the keys backend, cases, dtypes, reason, seen_with, got no "
     "backend"),
    (ONE + 'link = "https://x"\n',
     "known.toml: issue[0]: expected keys among backend, cases, dtypes, reason, seen_with, url, atlas, "
     "got 'link'"),
    (ONE.replace('cases = ["tf_basic"]', 'cases = "tf_basic"'),
     "known.toml: issue[0].cases: expected a non-empty list of case-name globs, got 'tf_basic'"),
    (ONE.replace('cases = ["tf_basic"]', "cases = []"),
     "known.toml: issue[0].cases: expected a non-empty list of case-name globs, got []"),
    (ONE.replace('dtypes = ["float32"]', 'dtypes = ["float8"]'),
     "known.toml: issue[0].dtypes: expected globs matching one of float16, bfloat16, float32, "
     "float64, got 'float8'"),
    (ONE.replace('reason = "off by one"', 'reason = ""'),
     "known.toml: issue[0].reason: expected a non-empty string without surrounding spaces, "
     "got ''"),
    (ONE.replace('backend = "tf"', "backend = 3"),
     "known.toml: issue[0].backend: expected a non-empty string without surrounding spaces, "
     "got 3"),
    (ONE + 'url = "github.com/x"\n',
     "known.toml: issue[0].url: expected an https:// address, got 'github.com/x'"),
    (ONE + "[[issue]]\nbackend = 'tf'\n",
     "known.toml: issue[1]: expected the keys backend, cases, dtypes, reason, seen_with, got no "
     "cases, dtypes, reason, seen_with"),
]


@pytest.mark.parametrize("text, message", BAD)
def test_a_malformed_file_is_one_line_naming_file_and_field(tmp_path, text, message):
    """Each mistake is one ValueError that says which file, which issue and which field."""
    with pytest.raises(ValueError) as info:
        _load(tmp_path, text)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_a_well_formed_file_keeps_every_field(tmp_path):
    """The optional url and atlas are kept, absent ones are None; lists become tuples."""
    (issue,) = _load(tmp_path, ONE + 'url = "https://example.org/1"\natlas = "tf-x"\n')
    assert issue == KnownIssue(backend="tf", cases=("tf_basic",), dtypes=("float32",),
                               reason="off by one", seen_with="tensorflow-cpu 2.21",
                               url="https://example.org/1", atlas="tf-x")
    (bare,) = _load(tmp_path, ONE)
    assert (bare.url, bare.atlas) == (None, None)
