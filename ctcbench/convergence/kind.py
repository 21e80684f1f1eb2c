"""The run folders ``ctcbench convergence`` writes: one summary row per training run in
``rows.jsonl``, each run's curve, config and checkpoint in ``runs/<run>/``."""
from ctcbench.runs.kinds import RunKind

SUMMARY_FLOATS = ("final_cer", "final_seq_acc", "final_test_loss", "final_blank_frac", "cpu_s",
                  "wall_s", "beam_cer", "beam_seq_acc")  # "nan" in rows.jsonl is a float again

KIND = RunKind("convergence", row_format=1, key=("run",), floats=SUMMARY_FLOATS,
               exports=("summary.csv", "summary.json", "curves.csv", "optimizers.csv",
                        "convergence.png", "runs/", "report.html"),
               context="ctcbench.convergence.page:context")
