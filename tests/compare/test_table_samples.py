"""compare's table shows one sample's figures, the sample furthest out of tolerance, and the
JSON keeps the batch's sums. The backend is wrong on purpose (it scores every sample over all
T frames, tests/wrong_backends.py); each sample's loss, got and wanted, is recomputed here by
brute force over every path."""
from __future__ import annotations

import itertools
import json
import math

import numpy as np
import pytest
from click.testing import CliRunner

from ctcbench.caselib.builders import to_problem, variants
from ctcbench.caselib.library import load_cases
from ctcbench.cli import cli

CASES = ("zero_length_input", "ragged_batch")


@pytest.fixture
def wrong_lengths(register_backends, monkeypatch):
    monkeypatch.setenv("CTCBENCH_THREADS", "1")
    register_backends("wrong-lengths", "wrong_backends:IgnoresInputLengths")


def brute_force(log_probs, target) -> float:
    """-log of the summed probability of every path over these frames collapsing to target."""
    T, C = log_probs.shape
    total = 0.0
    for path in itertools.product(range(C), repeat=T):
        kept = [k for i, k in enumerate(path) if k != 0 and (i == 0 or k != path[i - 1])]
        if kept == list(target):
            total += math.exp(sum(log_probs[t, k] for t, k in enumerate(path)))
    return -math.log(total) if total > 0 else math.inf


def losses(name):
    """Per sample: (what the wrong backend computes, the right loss), by brute force."""
    case = next(c for c in load_cases(None) if c.name == name)
    p = to_problem(variants(case.build, case.variants, case=name)[0].raw, "float64")
    T, N, C, _ = p.shape
    out = []
    for n in range(N):
        Tn, target = int(p.input_lengths[n]), p.targets[n, :p.target_lengths[n]].tolist()
        x = np.where(np.arange(T)[:, None] < Tn, p.logits[:, n], 0.0)  # padding read as 0
        lp = x - np.log(np.exp(x).sum(axis=1, keepdims=True))  # (T, C)
        out.append((brute_force(lp, target), brute_force(lp[:Tn], target)))
    return out


def table_rows(output: str) -> dict:
    """The table's cells by case: columns split on two or more spaces."""
    lines = output.splitlines()
    head = lines[0].split()
    rows = {}
    for line in lines[1:]:
        cells = [c for c in line.split("  ") if c.strip()]
        if len(cells) >= len(head) - 1 and cells[0].strip() in ("mismatch", "ok"):
            rows[cells[2].strip()] = dict(zip(head, (c.strip() for c in cells)))
    return rows


def test_the_table_shows_the_worst_samples_loss_and_the_json_the_batch_sums(wrong_lengths,
                                                                            tmp_path):
    args = ["compare", "--backend", "wrong-lengths", *[a for c in CASES for a in ("--case", c)],
            "--dtype", "float64", "--no-plot"]
    table = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "table")])
    assert table.exit_code == 1, table.output
    shown = table_rows(table.stdout)
    as_json = CliRunner().invoke(cli, [*args, "--out", str(tmp_path / "json"), "--format",
                                       "json"])
    rows = {r["case"]: r for r in json.loads(as_json.stdout)["rows"]}
    for name in CASES:
        per_sample = losses(name)
        errors = [abs(g - w) if g != w else 0.0 for g, w in per_sample]
        worst = max(range(len(errors)), key=lambda n: errors[n])
        got, want = per_sample[worst]
        row = shown[name]
        assert row["sample"] == str(worst)
        assert float(row["loss"]) == pytest.approx(got, rel=1e-5)
        assert float(row["expected"]) == pytest.approx(want, rel=1e-5)
        assert float(row["loss_err"]) == pytest.approx(errors[worst], rel=0.05)
        # the JSON keeps the sums over the batch, as before
        assert rows[name]["loss"] == pytest.approx(sum(g for g, _ in per_sample), rel=1e-9)
        wanted = sum(w for _, w in per_sample)
        assert (rows[name]["expected_loss"] == "inf" if math.isinf(wanted)
                else rows[name]["expected_loss"] == pytest.approx(wanted, rel=1e-9))
    assert shown["zero_length_input"]["expected"] == "inf"  # one label in no frame: no path
