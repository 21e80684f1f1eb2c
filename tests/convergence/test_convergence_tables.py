"""A step never reached is one value in every convergence output: empty in the table and the
CSV files, null in JSON; a real NaN result stays "nan"."""
import pytest
import csv
import json

from click.testing import CliRunner

from ctcbench.cli import cli

# three SGD steps at an absurd rate: the loss overflows to NaN and CER 2% is never reached
DIVERGED = ["--train-size", "32", "--test-size", "8", "--min-len", "1", "--max-len", "3",
            "--steps", "3", "--eval-every", "1", "--batch-size", "4", "--channels", "4",
            "--hidden", "8", "--optimizer", "sgd", "--lr", "1e30"]
NEVER = ("steps_to_cer10", "steps_to_cer02")


@pytest.mark.long
def test_never_reached_steps_are_empty_in_tables_and_csv_and_null_in_json(tmp_path):
    """Table: blank cells, never None/NaN; summary.csv and optimizers.csv: empty fields;
    --format json and summary.json: null; the diverged loss is still "nan"."""
    out = tmp_path / "run"
    args = ["convergence", *DIVERGED, "--cache-dir", str(tmp_path / "cache")]
    res = CliRunner().invoke(cli, [*args, "--out", str(out)], catch_exceptions=False)
    assert res.exit_code == 0, res.output
    (run,) = (out / "runs").iterdir()
    rows = [json.loads(line) for line in (run / "curve.jsonl").open()]
    assert all(r["cer"] >= 0.10 for r in rows)  # the oracle: no eval reached either threshold

    table = res.stdout.split("\n\n")[0].splitlines()
    header, line = table[0], table[1]
    assert "None" not in res.stdout and "NaN" not in res.stdout
    for col in NEVER:  # the cell under the column's header is blank
        end = header.index(col) + len(col)
        assert line[end - len(col): end].strip() == "", (col, line)

    with (out / "summary.csv").open() as f:
        (summary,) = list(csv.DictReader(f))
    assert [summary[c] for c in NEVER] == ["", ""]
    assert summary["final_test_loss"] == "nan"
    with (out / "optimizers.csv").open() as f:
        (best,) = list(csv.DictReader(f))
    assert best["steps_to_cer10_median"] == ""

    for rows in (json.loads((out / "summary.json").read_text()),
                 json.loads(CliRunner().invoke(cli, ["convergence", "--out", str(out), "--resume",
                                                     "--format", "json"]).stdout)["runs"]):
        assert [rows[0][c] for c in NEVER] == [None, None]
        assert rows[0]["final_test_loss"] == "nan"
