"""``ctcbench doctor FILE --transformers-config config.json``: a batch the Transformers monitor
saved (time-major ``logits``, the raw ``labels``, ``input_lengths`` in encoder frames), read in
the conventions of the model's config."""
from __future__ import annotations

from ctcbench.doctor.examine import Examination
from ctcbench.doctor.load import MAX_BYTES, load_inputs
from ctcbench.errors import expect
from ctcbench.transformers.checks import diagnose_ctc
from ctcbench.transformers.conventions import read_conventions

SAVED = ("labels", "masks_blank_labels")  # what the monitor saves besides the doctor's arrays


def examine_saved(file, config, *, max_bytes: int = MAX_BYTES) -> Examination:
    """Diagnose the saved batch ``file`` with the model config ``config`` (a config.json path
    or dict); the label rule is the one saved with the batch, else this transformers'."""
    inputs = load_inputs(file, max_bytes=max_bytes, extra=SAVED)
    expect("labels" in inputs, "FILE", "a batch saved by ctcbench.transformers.Monitor (with "
           "the collator's labels)", f"arrays {', '.join(sorted(inputs))}")
    rule = inputs.get("masks_blank_labels")
    conv = read_conventions(config, masks_blank_labels=None if rule is None else bool(rule))
    key = next(k for k in ("logits", "log_probs", "probs") if k in inputs)
    expect(key == "logits", "FILE", "the model's logits", key)
    report = diagnose_ctc(inputs["logits"], inputs["labels"], inputs["input_lengths"], conv,
                          layout="TNC")
    return Examination(report, inputs)
