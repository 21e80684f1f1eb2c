"""``ctcbench.compare.causes``: each common fault, planted in a CTC loss written apart from the
fault models (tests/function/faulty_losses.py), named as the planted one on a few cases, and
nothing named for the right loss. Rows are made as compare makes a ``--function`` backend's
(``check_function``), in this process to stay quick; tests/function/test_fault_causes.py runs
the command itself."""
import functools
import json
from pathlib import Path

import pytest

from ctcbench.caselib.library import load_cases, select_cases
from ctcbench.compare.causes import (CONFIG, EVIDENCE, cause_lines, check_function, find_causes,
                                     lead_reasons)
from ctcbench.compare.checks import prepare_all
from ctcbench.compare.page import context
from ctcbench.compare.table import tidy
from ctcbench.runtime.function_backend import FunctionBackend
from ctcbench.runtime.registry import get_backend, register_backend, unregister_backend

PLANTED = Path(__file__).parent.parent / "function"
# where each fault shows: repeats, empty targets, zero lengths, an infeasible target, padded
# frames and labels, a blank of C - 1 and moved, a masked class (a probability of 0)
CASES = ("tf_basic", "toy_alpha_beta", "repeat_perfect_vs_blank", "empty_target",
         "infeasible_target", "zero_length_input", "ragged_batch", "blank_first_vs_last",
         "masked_classes", "nan_in_padded_frames")
FAULTS = ("repeats", "trailing_blank", "leading_blank", "log_zero", "zero_length",
          "empty_target", "probs", "logits", "per_target", "per_input", "batch_sum",
          "blank_zero", "blank_last", "past_length", "padded_frames", "grad_log_probs",
          "nan_softmax")
NAMES = {"repeats": "repeated labels", "trailing_blank": "no trailing blank",
         "leading_blank": "no leading blank", "log_zero": "finite log-zero",
         "zero_length": "zero-length input", "empty_target": "empty target",
         "probs": "probabilities as log-probs", "logits": "logits not normalised",
         "per_target": "divided by target length", "per_input": "divided by input length",
         "batch_sum": "batch sum", "blank_zero": "blank argument ignored",
         "blank_last": "blank as C-1", "past_length": "targets read past their length",
         "padded_frames": "padded frames read", "grad_log_probs": "gradient w.r.t. log-probs",
         "nan_softmax": "NaN from a division by the softmax"}


@pytest.fixture(scope="module")
def preps():
    return prepare_all(select_cases(load_cases(None), list(CASES)), ["float64"])


@pytest.fixture
def planted(monkeypatch):
    """``planted(name)``: the loss ``faulty_losses:<name>`` as compare's backend of that name,
    run in this process."""
    monkeypatch.syspath_prepend(str(PLANTED))
    names = []

    def load(name):
        target = f"faulty_losses:{name}"
        register_backend(target, functools.partial(FunctionBackend, target=target,
                                                   convention="numpy"), replace=True)
        names.append(target)
        return get_backend(target, isolated=False)
    yield load
    for name in names:
        unregister_backend(name)


def rows_of(backend, preps):
    ref = get_backend("numpy")
    return [check_function(backend, prep, ref) for prep in preps.values() if prep.problems]


def test_the_right_loss_gets_no_cause(planted, preps):
    """No false alarm: every row ok, nothing named."""
    rows = rows_of(planted("ctc_loss"), preps)
    assert {r["status"] for r in rows} == {"ok"}
    assert find_causes(rows, preps, ["faulty_losses:ctc_loss"]) == {}


@pytest.mark.parametrize("fault", FAULTS)
def test_each_planted_fault_is_named_and_no_other(planted, preps, fault):
    """The planted cause alone, explaining every failing sample; its rows' reasons lead
    with it."""
    name = f"faulty_losses:ctc_loss_{fault}"
    rows = rows_of(planted(f"ctc_loss_{fault}"), preps)
    found = find_causes(rows, preps, [name])
    assert [line.split(":")[0] for line in found[name]["lines"]] == [NAMES[fault]]
    line = found[name]["lines"][0]
    explained, failing = map(int, line.rsplit("(matches on ", 1)[1].split(" failing")[0]
                             .split(" of "))
    assert explained == failing > 0  # a fault planted alone explains every failing sample
    # every failing row the fault explains leads its reason with the cause
    df = lead_reasons(tidy(rows), found)
    led = df[df["cause"].notna()]
    assert len(led) and all(r.startswith(f"{NAMES[fault]} | ") for r in led["reason"])
    assert set(led["status"]) == {"mismatch"}


def test_a_row_keeps_its_samples_verdicts_and_a_failure_the_faults_do_not_know_is_unnamed(
        planted, preps):
    """The evidence is in the row as JSON; a right loss scaled by 1.5 (no fault of the
    library) fails every sample and is explained by none."""
    rows = rows_of(planted("ctc_loss_repeats"), preps)
    failing = [r for r in rows if r["status"] == "mismatch"]
    assert all(set(r[EVIDENCE]) == {"failing", "explained", "contradicted"} for r in failing)
    json.dumps(failing[0][EVIDENCE])  # plain JSON, as rows.jsonl holds it
    unknown = [{**r, EVIDENCE: {"failing": r[EVIDENCE]["failing"], "explained": {},
                                "contradicted": {}}} for r in failing]
    assert find_causes(unknown, preps, ["faulty_losses:ctc_loss_repeats"]) == {}


def test_several_functions_each_line_says_whose(planted, preps):
    """Each function's causes are its own; the right one among them gets none."""
    a, b = "faulty_losses:ctc_loss_repeats", "faulty_losses:ctc_loss_per_input"
    rows = [r for name in ("ctc_loss_repeats", "ctc_loss_per_input", "ctc_loss")
            for r in rows_of(planted(name), preps)]
    lines = cause_lines(find_causes(rows, preps, [a, b, "faulty_losses:ctc_loss"]))
    assert [line.split(": ")[:2] for line in lines] == [[a, NAMES["repeats"]],
                                                        [b, NAMES["per_input"]]]
    alone = cause_lines(find_causes(rows, preps, [a, "faulty_losses:ctc_loss"]))
    assert alone[0].startswith(f"{a}: {NAMES['repeats']}: ")  # two checked: whose is said


def test_a_folder_from_before_causes_reports_as_it_did(tmp_path):
    """No ``causes`` in meta.json, no ``faults`` in the rows: the page has no cause and the
    reasons as written; with them, the reason leads with the cause."""
    row = {"status": "mismatch", "backend": "mine:loss", "case": "tf_basic", "dtype": "float64",
           "device": "cpu", "loss": 1.0, "expected_loss": 2.0, "reason": "loss vs published"}
    (tmp_path / "rows.jsonl").write_text(json.dumps(row) + "\n")
    meta = {"kind": "compare", "row_format": 1, "config": {"backends": ["mine:loss"]}}
    page = context(tmp_path, meta, tmp_path)
    cell = page["matrix"][0]["cells"]["mine:loss"]["rows"][0]
    assert page["causes"] == [] and cell["reason"] == "loss vs published"
    causes = {"mine:loss": {"lines": ["repeated labels: ... (matches on 2 of 2 failing samples)"],
                            "rows": {"tf_basic/float64": ["repeated labels"]}}}
    page = context(tmp_path, {**meta, "config": {**meta["config"], CONFIG: causes}}, tmp_path)
    cell = page["matrix"][0]["cells"]["mine:loss"]["rows"][0]
    assert page["causes"] == causes["mine:loss"]["lines"]
    assert cell["reason"] == "repeated labels | loss vs published"
