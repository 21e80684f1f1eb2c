"""The counts of a compare run: the terminal's summary line and the page's verdict say the same
words, and both say what the run folder's rows hold."""
from __future__ import annotations

import json
from collections import Counter
from html.parser import HTMLParser

from click.testing import CliRunner

from ctcbench.cli import cli

# two loss cases (tf_basic has a repeated label, which merges-repeats gets wrong) and two inputs
# the API must refuse (input-check rows, no backend's)
CASES = ["tf_basic", "toy_alpha_beta", "tf_rank_too_small", "tf_zero_classes"]


class VerdictChips(HTMLParser):
    """The words of each chip inside the page's ``<div class="verdict ...">``."""

    def __init__(self):
        super().__init__()
        self.depth, self.in_chip, self.chips = 0, False, []

    def handle_starttag(self, tag, attrs):
        classes = (dict(attrs).get("class") or "").split()
        if self.depth:
            self.depth += tag == "div"
            if tag == "span" and "chip" in classes:
                self.in_chip = True
                self.chips.append("")
        elif tag == "div" and "verdict" in classes:
            self.depth = 1

    def handle_endtag(self, tag):
        if self.depth and tag == "div":
            self.depth -= 1
        self.in_chip = self.in_chip and tag != "span"

    def handle_data(self, data):
        if self.in_chip:
            self.chips[-1] += data.strip()


def counted_by_hand(run_dir) -> list[str]:
    """The counts read straight off rows.jsonl: rows per status of the backends' rows, and the
    input checks passed of how many (the order left to the comparison)."""
    rows = [json.loads(line) for line in (run_dir / "rows.jsonl").read_text().splitlines()]
    checks = [r for r in rows if r["backend"] == "input-check"]
    words = [f"{n} {s}" for s, n in Counter(r["status"] for r in rows if r not in checks).items()]
    ok = sum(r["status"] == "ok" for r in checks)
    return words + ([f"{ok} of {len(checks)} input checks ok"] if checks else [])


def test_terminal_and_page_count_the_same_rows(tmp_path, register_backends):
    """On one real run folder (a wrong plugin, the reference, two input checks) the summary
    line's counts and the page's chips are the same words, and each is what rows.jsonl holds."""
    register_backends("merges-repeats", "wrong_backends:MergesRepeats")
    out = tmp_path / "run"
    argv = ["compare", "--backend", "numpy", "--backend", "merges-repeats", "--dtype",
            "float64", "--no-plot", "--out", str(out), *(a for c in CASES for a in ("--case", c))]
    res = CliRunner().invoke(cli, argv)
    assert res.exit_code == 1, res.output  # merges-repeats fails the gate
    tail = res.stdout.splitlines()[-1]
    assert tail.startswith("compare FAILED: ") and "; " in tail, tail
    terminal = tail.removeprefix("compare FAILED: ").split("; ")[0].split(", ")
    parser = VerdictChips()
    parser.feed((out / "report.html").read_text(encoding="utf-8"))
    assert parser.chips == terminal
    expected = counted_by_hand(out)
    assert sorted(terminal) == sorted(expected)
    assert "2 of 2 input checks ok" in expected and any(w.endswith(" mismatch") for w in expected)
