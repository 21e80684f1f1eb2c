"""A third party's decoders through the entry-point group ``ctcbench.decoders``: a scratch
distribution declares a right greedy decoder and a wrong one, and ``ctcbench compare
--decoder`` judges both against the case library's exact answers."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from ctcbench.caselib.decoder_cases import load_decoder_cases
from ctcbench.runtime.decoders import (
    decoder_names,
    get_decoder,
    register_decoder,
    unregister_decoder,
)

# Written as a third party would, with no ctcbench code: greedy decoding is the argmax per
# frame, repeats merged, then blanks dropped; the wrong one drops the blanks first
# (keras#12238's fault) and runs isolated, so the worker rebuilds it from its entry point.
SCRATCH = '''
import numpy as np


class Greedy:
    search = "greedy"
    score = "path"

    def decode(self, log_probs, lengths, *, blank, beam=1):
        out = []
        for n, frames in enumerate(lengths):
            lp = log_probs[:int(frames), n]  # (T_n, C)
            best = lp.argmax(-1).tolist()
            labels = [k for i, k in enumerate(best)
                      if k != blank and (i == 0 or best[i - 1] != k)]
            out.append([[labels, float(lp.max(-1).sum())]])
        return out


class BlanksFirst:
    search = "greedy"
    score = "none"
    isolated = True

    def decode(self, log_probs, lengths, *, blank, beam=1):
        out = []
        for n, frames in enumerate(lengths):
            kept = [k for k in log_probs[:int(frames), n].argmax(-1).tolist() if k != blank]
            out.append([[[k for i, k in enumerate(kept) if i == 0 or kept[i - 1] != k], None]])
        return out


class Misdeclared(Greedy):
    role = "decodr"
'''

RIGHT, WRONG = "scratch-greedy", "scratch-blanks-first"
TYPO = "scratch-misdeclared"  # a role misspelt: its row fails the run, the others still run
FAMILIES = ("repeats", "edges")  # the brute-force families: every answer enumerated
# the cases whose right answer has a repeat a blank separates, which the wrong one merges
MERGED = {"repeat_across_blank", "abccd_merged_after_blank_removal", "double_letter_word"}


@pytest.fixture
def scratch(tmp_path, monkeypatch):
    """A real distribution (a module and its dist-info) on sys.path, declaring both
    decoders in the group ctcbench.decoders; the folder to put on PYTHONPATH."""
    (tmp_path / "scratch_decoders.py").write_text(SCRATCH)
    info = tmp_path / "scratch_decoders-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: scratch-decoders\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(
        f"[ctcbench.decoders]\n{RIGHT} = scratch_decoders:Greedy\n"
        f"{WRONG} = scratch_decoders:BlanksFirst\n{TYPO} = scratch_decoders:Misdeclared\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    return tmp_path


def test_entry_point_decoders_are_registered_like_builtins(scratch):
    """Both names are listed (as decoders), load and decode; an unregistered one is hidden
    until registered again."""
    assert {RIGHT, WRONG} <= set(decoder_names("decoder"))
    lp = np.log(np.array([[0.1, 0.9], [0.8, 0.2], [0.1, 0.9]]))[:, None]  # (T=3, N=1, C=2)
    # argmax 1, blank, 1: CTC's map keeps both 1s; dropping blanks first merges them
    assert get_decoder(RIGHT).decode(lp, [3], blank=0)[0][0].labels == (1, 1)
    unregister_decoder(RIGHT)
    try:
        assert RIGHT not in decoder_names() and WRONG in decoder_names()
    finally:
        register_decoder(RIGHT, "scratch_decoders:Greedy")
    assert get_decoder(RIGHT).traits.score == "path"
    unregister_decoder(RIGHT)  # hidden, registered no more: nothing of it outlives the test


def test_compare_judges_entry_point_decoders_against_the_exact_answers(scratch, tmp_path):
    """`ctcbench compare --decoder` in a fresh process: the right decoder passes every
    brute-force case, the wrong one fails exactly where a repeat is separated by a blank; one
    that misdeclares a trait is one error row naming it, and the run still ends whole."""
    globs = [a for f in FAMILIES for a in ("--case", f"decoders/{f}/*")]
    cmd = [sys.executable, "-c", "from ctcbench.cli import main; main()", "compare",
           "--decoder", TYPO, "--decoder", RIGHT, "--decoder", WRONG, *globs, "--format",
           "json", "--out", str(tmp_path / "run")]
    env = {**os.environ, "PYTHONPATH": str(scratch), "CTCBENCH_THREADS": "1"}
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 1, proc.stderr[-2000:]  # the wrong decoder fails the gate
    rows = json.loads(proc.stdout)["rows"]
    cases = {c.name for c in load_decoder_cases() if c.family in FAMILIES}
    right = {r["case"]: r for r in rows if r["backend"] == RIGHT}
    wrong = {r["case"]: r for r in rows if r["backend"] == WRONG}
    assert set(right) == set(wrong) == cases
    assert {r["oracle"] for r in rows if r["backend"] != TYPO} == {"brute force"}
    assert all(r["status"] == "ok" for r in right.values()), right
    assert {c for c, r in wrong.items() if r["status"] != "ok"} == MERGED
    for case in MERGED:
        assert wrong[case]["status"] == "mismatch"
        assert "repeats merged across a blank" in wrong[case]["reason"]
    [typo] = [r for r in rows if r["backend"] == TYPO]
    assert typo["status"] == "error" and typo["case"] == "*" and typo["reason"] == (
        f"failed to load: InputError: decoder '{TYPO}': Misdeclared.role: expected one of "
        "aligner, decoder, got 'decodr' (did you mean 'decoder'?)")
    assert (tmp_path / "run" / "report.html").is_file()
