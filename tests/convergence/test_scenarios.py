"""Named experiments: one grid per arm, the precedence of settings, the tables against
hand-computed medians, and a whole (tiny) scenario through the command line, resumed."""
import json
from types import SimpleNamespace

import pandas as pd
import pytest
from click.testing import CliRunner

from ctcbench.cli import cli
from ctcbench.convergence.runconfig import build
from ctcbench.convergence.scenarios import (SCENARIOS, arm_values, finding_counts,
                                            scenario_tables)

TINY_ARGS = ["--train-size", "48", "--test-size", "8", "--min-len", "1", "--max-len", "3",
             "--steps", "2", "--eval-every", "2", "--batch-size", "4", "--channels", "4",
             "--hidden", "8", "--seed", "0", "--jobs", "1"]


@pytest.mark.parametrize("name", list(SCENARIOS))
def test_every_arm_of_every_scenario_is_a_valid_grid(name):
    """Each arm's settings build a config that passes every check (no typo in a key)."""
    scenario = SCENARIOS[name]
    assert "baseline" in scenario.arms
    for arm in scenario.arms:
        base, grid = build(arm_values(scenario, arm, {}))
        base.check()
        assert grid.configs(base)


def test_the_command_line_overrides_shared_settings_but_not_an_arms_own():
    """Scenario settings < what is given < the arm's own change."""
    scenario = SCENARIOS["captcha-stall"]
    given = {"lr": (0.01,), "steps": 50}
    assert arm_values(scenario, "baseline", given)["lr"] == (0.01,)
    assert arm_values(scenario, "lr3e-3", given)["lr"] == (3e-3,)
    assert arm_values(scenario, "lr3e-3", given)["steps"] == 50


def _result(model, opt, lr, plateau, cer10):
    rows = pd.DataFrame({"model": model, "optimizer": opt, "lr": lr, "seed": range(len(plateau)),
                         "plateau_end_step": plateau, "steps_to_cer10": cer10,
                         "final_cer": [0.5] * len(plateau)})
    return SimpleNamespace(rows=rows, run_dir="unused")


def test_tables_give_medians_and_the_arms_against_the_baseline():
    """Medians by hand: baseline plateau (100, 200, 300) -> 200, the arm's (50, 60, 70) -> 60:
    difference -140, and every resample lies in [50, 70] - [100, 300], so the interval is
    below 0 and the arm is sooner. A censored seed (None) counts as never: a baseline that
    never reaches CER < 10% loses to an arm that always does."""
    results = {"baseline": _result("m", "adam", 1e-3, [100, 200, 300], [None, None, None]),
               "fix": _result("m", "adam", 1e-3, [50, 60, 70], [300, 350, 400])}
    table, _, versus = scenario_tables(results)
    got = table.set_index(["arm", "metric"])
    assert got.loc[("baseline", "plateau_end_step"), "median"] == 200
    assert got.loc[("fix", "plateau_end_step"), "median"] == 60
    assert got.loc[("baseline", "steps_to_cer10"), "median"] == float("inf")
    assert got.loc[("baseline", "steps_to_cer10"), "n_censored"] == 3
    row = versus.set_index("metric").loc["plateau_end_step"]
    assert row["arm"] == "fix" and row["difference"] == -140
    assert -250 <= row["ci_low"] <= row["ci_high"] <= -30
    sooner = dict(zip(versus["metric"], versus["sooner"]))
    assert sooner == {"plateau_end_step": True, "steps_to_cer10": True}  # 350 vs never


def test_finding_counts_are_per_run_and_per_diagnosed_eval():
    """Two runs, four diagnosed evals (None = not diagnosed): each code is counted by hand;
    time-invariant is listed for the healthy model even where it never fired."""
    curves = pd.DataFrame({
        "arm": "a", "model": ["crnn"] * 5 + ["repeatvec"],
        "run": ["r1", "r1", "r1", "r2", "r2", "r3"],
        "findings": [[], ["blank-collapse"], None, ["blank-collapse"], [], ["time-invariant"]]})
    got = {(r["model"], r["finding"]): (r["runs_flagged"], r["runs"], r["evals_flagged"],
                                        r["diagnosed_evals"])
           for r in finding_counts(curves).to_dict("records")}
    assert got == {("crnn", "time-invariant"): (0, 2, 0, 4),
                   ("crnn", "blank-collapse"): (2, 2, 2, 4),
                   ("repeatvec", "time-invariant"): (1, 1, 1, 1)}


@pytest.mark.long
def test_a_whole_scenario_runs_resumes_and_refuses_a_second_start(tmp_path):
    """Every arm runs into its own folder (with its report), --resume keeps them as they
    are, a second start and another scenario's name are refused."""
    out = tmp_path / "sc"
    args = ["convergence", "--scenario", "captcha-stall", *TINY_ARGS, "--lr", "0.01",
            "--out", str(out), "--cache-dir", str(tmp_path / "cache"), "--format", "json"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    doc = json.loads(first.stdout)
    arms = [a["arm"] for a in doc["arms"]]
    assert arms == list(SCENARIOS["captcha-stall"].arms)
    lrs = {a["arm"]: {r["lr"] for r in a["runs"]} for a in doc["arms"]}
    assert lrs["baseline"] == {0.01} and lrs["lr3e-3"] == {0.003}  # an arm keeps its change
    for arm in arms:
        assert (out / arm / "summary.json").is_file() and (out / arm / "report.html").is_file()
    assert len(doc["versus_baseline"]) == 2 * (len(arms) - 1)
    assert json.loads((out / "verdicts.json").read_text())["verdicts"] == doc["verdicts"]
    assert (out / "scenario.png").stat().st_size > 0
    assert {f["arm"] for f in doc["findings"]} == set(arms)  # step 0 is diagnosed in every arm

    again = CliRunner().invoke(cli, args)
    assert again.exit_code != 0 and "already holds scenario 'captcha-stall'" in again.output
    mtimes = {arm: (out / arm / "rows.jsonl").stat().st_mtime_ns for arm in arms}
    short = [a for a in args if a not in ("--lr", "0.01")]  # resumed without repeating --lr
    resumed = CliRunner().invoke(cli, [*short, "--resume"])
    assert resumed.exit_code == 0, resumed.output
    assert json.loads(resumed.stdout)["verdicts"] == doc["verdicts"]
    assert {arm: (out / arm / "rows.jsonl").stat().st_mtime_ns for arm in arms} == mtimes
    other = CliRunner().invoke(cli, [*args, "--resume", "--scenario", "repeatvec"])
    assert other.exit_code != 0 and "holds scenario 'captcha-stall', not 'repeatvec'" in other.output


def test_a_scenario_into_a_folder_of_other_files_is_refused(tmp_path):
    """A folder holding anything else is refused, and left as it was."""
    (tmp_path / "notes.txt").write_text("mine")
    res = CliRunner().invoke(cli, ["convergence", "--scenario", "repeatvec", *TINY_ARGS,
                                   "--out", str(tmp_path)])
    assert res.exit_code != 0
    assert "--out: expected a new or empty folder for a scenario" in res.output
    assert (tmp_path / "notes.txt").read_text() == "mine"


def test_a_damaged_scenario_record_is_named_not_a_traceback(tmp_path):
    """A scenario.json that is not JSON: one error line naming it."""
    (tmp_path / "scenario.json").write_text("{not json")
    res = CliRunner().invoke(cli, ["convergence", "--scenario", "repeatvec", *TINY_ARGS,
                                   "--out", str(tmp_path), "--resume"])
    assert res.exit_code == 1
    assert "--out: expected a scenario.json written by `ctcbench convergence --scenario`" in res.output


def test_a_bad_option_is_named_before_any_arm_starts(tmp_path):
    """A curriculum no 5-character captcha fits is refused naming the option; nothing is
    written, so the same folder can be used once the option is fixed."""
    out = tmp_path / "sc"
    res = CliRunner().invoke(cli, ["convergence", "--scenario", "captcha-stall", *TINY_ARGS,
                                   "--min-len", "5", "--max-len", "5", "--curriculum-steps", "5",
                                   "--out", str(out)])
    assert res.exit_code == 1
    assert "--curriculum-len: expected at least data.min_len (5)" in res.output
    assert not out.exists()
