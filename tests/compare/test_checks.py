"""compare's per-row check: which failures are known issues, and what the row then says."""
from __future__ import annotations

import pytest

from ctcbench import BackendCrashed, BackendTraits, LoadedBackend, get_backend
from ctcbench.caselib.library import load_cases, select_cases
from ctcbench.compare.checks import check, known_reason, prepare


class CrashesWithSIGFPE:
    """Dies on every problem, as warp-ctc does on a batch of empty targets."""

    def run(self, problem, *, grad_weights=None):
        raise BackendCrashed("worker died with signal SIGFPE", signal="SIGFPE")


class DeclaresItsOwn(CrashesWithSIGFPE):
    """A plugin that lists its own upstream bug."""

    known_issues = {"tf_basic/float*": "the plugin's own bug"}


def _loaded(name: str, impl) -> LoadedBackend:
    return LoadedBackend(name, impl, BackendTraits.of(impl))


@pytest.fixture(scope="module")
def preps():
    cases = select_cases(load_cases(), ["empty_target", "tf_basic"])
    return {c.name: prepare(c, "float64") for c in cases}


@pytest.mark.parametrize("name, impl, case, status, reason", [
    # a built-in's issue comes from cases/known_issues.toml, by the backend's name
    ("warpctc", CrashesWithSIGFPE(), "empty_target", "known",
     "known crashed: SIGFPE when every target in the batch is empty | worker died with signal "
     "SIGFPE"),
    ("warpctc", CrashesWithSIGFPE(), "tf_basic", "crashed", "worker died with signal SIGFPE"),
    # another name, the same failure: nothing in the table covers it
    ("my-warpctc", CrashesWithSIGFPE(), "empty_target", "crashed", "worker died with signal SIGFPE"),
    # a plugin's own known_issues trait
    ("my-plugin", DeclaresItsOwn(), "tf_basic", "known",
     "known crashed: the plugin's own bug | worker died with signal SIGFPE"),
    ("my-plugin", DeclaresItsOwn(), "empty_target", "crashed", "worker died with signal SIGFPE"),
])
def test_a_failure_is_known_only_where_an_issue_lists_it(preps, name, impl, case, status, reason):
    """The row keeps its own failure after the known reason; an unlisted row still fails."""
    row = check(_loaded(name, impl), preps[case], get_backend("numpy"))
    assert (row["status"], row["reason"]) == (status, reason)


def test_the_table_comes_before_the_trait():
    """A built-in name listed in the table gets the table's reason even if it declares one."""
    loaded = _loaded("warpctc", type("Both", (CrashesWithSIGFPE,),
                                     {"known_issues": {"empty_target/*": "declared"}})())
    assert known_reason(loaded, "empty_target", "float32") == \
        "SIGFPE when every target in the batch is empty"
    assert known_reason(loaded, "tf_basic", "float32") is None
