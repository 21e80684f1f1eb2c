"""``ctcbench.testing.assert_ctc_conformant``: silent on a correct CTC, an AssertionError
naming the failing cases and the command that reproduces each on the planted bug."""
import sys
from pathlib import Path

import pytest

from ctcbench.runtime.registry import unregister_backend
from ctcbench.testing import assert_ctc_conformant

IMPLEMENTATIONS = Path(__file__).parent.parent / "implementations"
CASES = ["toy_alpha_beta", "repeat_perfect_vs_blank", "tf_basic"]


@pytest.fixture(autouse=True)
def beside_the_implementations(monkeypatch):
    monkeypatch.chdir(IMPLEMENTATIONS)
    monkeypatch.syspath_prepend(str(IMPLEMENTATIONS))
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    yield
    for name in ("numpy_ctc:ctc_loss", "numpy_ctc:ctc_loss_skips_repeats"):
        try:
            unregister_backend(name)
        except KeyError:  # not registered: the test stopped before
            pass


def test_a_correct_function_passes_silently():
    import numpy_ctc
    assert assert_ctc_conformant(numpy_ctc.ctc_loss, cases=CASES, dtypes=["float64"],
                                 convention="numpy") is None


def test_the_planted_bug_fails_naming_its_cases_and_how_to_reproduce_them():
    with pytest.raises(AssertionError) as info:
        assert_ctc_conformant("numpy_ctc:ctc_loss_skips_repeats", cases=CASES,
                              dtypes=["float64"], convention="numpy")
    message = str(info.value)
    assert "repeat_perfect_vs_blank [float64] mismatch" in message
    assert "toy_alpha_beta" not in message  # no repeated label: the bug cannot show
    assert ("reproduce: ctcbench compare --function numpy_ctc:ctc_loss_skips_repeats "
            "--convention numpy --case repeat_perfect_vs_blank --dtype float64") in message
    assert "bound loss within" in message


def test_a_function_a_worker_cannot_import_is_refused():
    from ctcbench.errors import InputError
    with pytest.raises(InputError, match="fn: expected a module-level function"):
        assert_ctc_conformant(lambda *a: None)
