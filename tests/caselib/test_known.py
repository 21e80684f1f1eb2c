"""The known-issues table: its format, and that every issue names a real backend and real cases."""
from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import pytest

from ctcbench.caselib.known import known_issue, load_known_issues, parse_known_issues
from ctcbench.caselib.library import load_cases
from ctcbench.runtime.registry import BUILTIN_BACKENDS

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
def raw_issues():
    """The file's issues as TOML reads them, without the loader under test."""
    return tomllib.loads(TABLE.read_text())["issue"]


def test_the_builtin_table_loads(raw_issues):
    """The installed table is the repository's file, one issue per [[issue]]."""
    issues = load_known_issues()
    assert len(issues) == len(raw_issues) > 0
    assert [i.backend for i in issues] == [r["backend"] for r in raw_issues]


def test_every_backend_is_a_builtin_one(raw_issues):
    """Each issue names a backend of the built-in table (plugins declare their own)."""
    unknown = {r["backend"] for r in raw_issues} - set(BUILTIN_BACKENDS)
    assert not unknown, unknown


def test_every_case_glob_matches_a_case_of_the_library_in_a_listed_dtype(raw_issues, library):
    """No issue is dead: each case glob matches a library case that runs in one of the
    issue's dtypes (a renamed case would leave its issue behind)."""
    dead = []
    for r in raw_issues:
        for glob in r["cases"]:
            hits = [c for c in library if fnmatch.fnmatchcase(c.name, glob)
                    and any(fnmatch.fnmatchcase(d, g) for d in c.dtypes for g in r["dtypes"])]
            if not hits:
                dead.append(f"{r['backend']}: {glob} / {r['dtypes']}")
    assert not dead, dead


def test_no_row_is_claimed_by_two_issues_of_one_backend(raw_issues, library):
    """Each (backend, case, dtype) of the library has at most one reason."""
    claimed = {}
    for i, r in enumerate(raw_issues):
        for c in library:
            for d in c.dtypes:
                if any(fnmatch.fnmatchcase(c.name, g) for g in r["cases"]) and \
                        any(fnmatch.fnmatchcase(d, g) for g in r["dtypes"]):
                    claimed.setdefault((r["backend"], c.name, d), []).append(i)
    twice = {k: v for k, v in claimed.items() if len(v) > 1}
    assert not twice, twice


def test_the_file_is_not_read_as_cases(library, tmp_path):
    """The table lives beside the case files but holds no cases, there or in a user folder."""
    assert not {c.source for c in library} & {TABLE.name}
    (tmp_path / TABLE.name).write_text(ONE)
    (tmp_path / "mine.toml").write_text((TABLE.parent / "published.toml").read_text())
    assert {c.source for c in load_cases(tmp_path)} == {"mine.toml"}


@pytest.mark.parametrize("backend, case, dtype, reason", [
    ("warpctc", "only_blank_class", "float64", "SIGFPE when every target in the batch is empty"),
    ("tf", "ragged_batch", "float64", "the C++ kernel adds log-probabilities in float32 "
                                      "(log1pf/expf) even for float64: ~1e-8 loss and ~1e-7 "
                                      "gradient error"),
    ("tf-dense", "peaked_logits_spread300_long", "float32",
     "wrong finite loss (about half the answer) for logits spanning 300 over long inputs"),
    ("tf", "peaked_logits_spread300_long", "float32",
     "loss inf: the float32 kernel takes the log of softmax probabilities, which underflow to 0"),
    ("tf-dense", "ragged_batch", "float64", None),  # tf's float64 issue is not tf-dense's
    ("torch", "only_blank_class", "float64", None),
    ("warpctc", "peaked_logits_spread300", "float64", None),
])
def test_known_issue_matches_backend_case_and_dtype(backend, case, dtype, reason):
    """A row matches on backend name, a case glob and a dtype glob together."""
    issue = known_issue(backend, case, dtype)
    assert (issue.reason if issue else None) == reason


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
    path = tmp_path / "known.toml"
    path.write_text(text)
    with pytest.raises(ValueError) as info:
        load_known_issues(path)
    assert str(info.value).startswith(message) and "\n" not in str(info.value)


def test_a_well_formed_file_keeps_every_field():
    """The optional url is kept; lists become tuples."""
    (issue,) = parse_known_issues(ONE + 'url = "https://example.org/1"\n', "k.toml")
    assert (issue.backend, issue.cases, issue.dtypes, issue.reason, issue.seen_with, issue.url) \
        == ("tf", ("tf_basic",), ("float32",), "off by one", "tensorflow-cpu 2.21",
            "https://example.org/1")
