"""The curve log: the numbers derived from it."""
from ctcbench.convergence.curve import summarize


def test_summarize_definitions():
    """Plateau end and steps-to-CER follow their documented definitions; censored is None."""
    rows = [{"step": 0, "emitted": 2.0, "cer": 0.95}, {"step": 10, "emitted": 0.0, "cer": 1.0},
            {"step": 20, "emitted": 0.6, "cer": 0.9}, {"step": 30, "emitted": 1.2, "cer": 0.3},
            {"step": 40, "emitted": 3.0, "cer": 0.05}]
    rows = [dict(r, seq_acc=0, test_loss=1, blank_frac=0.5, cpu_s=1, wall_s=1) for r in rows]
    s = summarize(rows)
    assert (s["plateau_end_step"], s["steps_to_cer10"], s["steps_to_cer02"]) == (30, 40, None)
    assert s["final_cer"] == 0.05
