"""The curve log: its eval steps, the rows a resumed run keeps, and the derived numbers."""
import math

from ctcbench.convergence.curve import complete_rows, eval_steps, summarize, write_rows


def test_eval_steps_are_step_0_every_interval_and_the_last():
    """7 steps evaluated every 3: 0, 3, 6 and the last step, 7; 6 every 3: no repeat of 6."""
    assert eval_steps(7, 3) == [0, 3, 6, 7]
    assert eval_steps(6, 3) == [0, 3, 6]
    assert eval_steps(1, 25) == [0, 1]


def _log(tmp_path, text: str):
    path = tmp_path / "curve.jsonl"
    path.write_text(text)
    return path


def test_complete_rows_stop_at_a_torn_line_or_a_gap(tmp_path):
    """Rows count as complete in schedule order, up to the first one that is torn, missing
    or out of place; rows after it are not kept even when they parse."""
    schedule = [0, 2, 4, 6]
    rows = '{"step": 0}\n{"step": 2}\n{"step": 4}\n'
    assert [r["step"] for r in complete_rows(_log(tmp_path, rows), schedule)] == [0, 2, 4]
    torn = '{"step": 0}\n{"step": 2}\n{"st'
    assert [r["step"] for r in complete_rows(_log(tmp_path, torn), schedule)] == [0, 2]
    gap = '{"step": 0}\n{"ste\n{"step": 4}\n'
    assert [r["step"] for r in complete_rows(_log(tmp_path, gap), schedule)] == [0]
    twice = '{"step": 0}\n{"step": 0}\n{"step": 2}\n'
    assert [r["step"] for r in complete_rows(_log(tmp_path, twice), schedule)] == [0]
    assert complete_rows(tmp_path / "none.jsonl", schedule) == []


def test_rows_written_read_back_the_same(tmp_path):
    """write_rows and complete_rows round-trip a diverged run's NaN and inf."""
    rows = [{"step": 0, "test_loss": math.inf, "cer": 1.0}, {"step": 2, "test_loss": 2.5,
                                                              "cer": math.nan}]
    path = tmp_path / "curve.jsonl"
    write_rows(path, rows)
    back = complete_rows(path, [0, 2])
    assert back[0] == rows[0] and back[1]["test_loss"] == 2.5 and math.isnan(back[1]["cer"])
    assert path.read_text().count("\n") == 2


def test_summarize_definitions():
    """Plateau end and steps-to-CER follow their documented definitions; censored is None."""
    rows = [{"step": 0, "emitted": 2.0, "cer": 0.95}, {"step": 10, "emitted": 0.0, "cer": 1.0},
            {"step": 20, "emitted": 0.6, "cer": 0.9}, {"step": 30, "emitted": 1.2, "cer": 0.3},
            {"step": 40, "emitted": 3.0, "cer": 0.05}]
    rows = [dict(r, seq_acc=0, test_loss=1, blank_frac=0.5, cpu_s=1, wall_s=1) for r in rows]
    s = summarize(rows)
    assert (s["plateau_end_step"], s["steps_to_cer10"], s["steps_to_cer02"]) == (30, 40, None)
    assert s["final_cer"] == 0.05
