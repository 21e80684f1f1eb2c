"""fuzz pays a backend's first call (imports, compilation) before its budget starts, and says
so when that call takes more than a second."""
from __future__ import annotations

import json
import time

from click.testing import CliRunner

from ctcbench.backends.numpy_ref import NumpyBackend
from ctcbench.cli import cli

FIRST_CALL_S = 2.0


class SlowFirstCall(NumpyBackend):
    """The reference, whose first call sleeps as a JIT compilation would."""

    compiled = False

    def run(self, problem):
        if not SlowFirstCall.compiled:
            time.sleep(FIRST_CALL_S)
            SlowFirstCall.compiled = True
        return super().run(problem)


def test_a_slow_first_call_is_announced_and_not_charged_to_the_budget(register_backends,
                                                                       tmp_path):
    register_backends("slow-first", SlowFirstCall)
    res = CliRunner().invoke(cli, ["fuzz", "--backend", "slow-first", "--budget", "1",
                                   "--format", "json", "--out", str(tmp_path / "f")])
    assert res.exit_code == 0, res.output
    assert "slow-first: first call (loading, compiling) takes more than 1 s; not counted in " \
           "--budget" in res.stderr
    found = json.loads(res.stdout)
    assert found["tried"] > 0 and found["seconds"] < FIRST_CALL_S  # the search had its second
