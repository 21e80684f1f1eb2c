"""``diagnose_batch(model, batch)``: the doctor on a batch as a ``*ForCTC`` model and its data
collator see it."""
from __future__ import annotations

from ctcbench.doctor.findings import Report
from ctcbench.errors import expect
from ctcbench.transformers.checks import diagnose_ctc
from ctcbench.transformers.conventions import frame_lengths, read_conventions


def diagnose_batch(model, batch, *, logits=None, tokenizer=None,
                   learning_rate: float | None = None, tuned_for: str = "mean") -> Report:
    """Diagnose ``batch`` (what the collator returns: ``input_values`` or ``input_features``,
    ``attention_mask``, ``labels``) for ``model``, a ``*ForCTC`` model; returns a ranked
    ``Report`` whose fixes name the config field or the collator line to change.

    logits: ``(N, T, C)`` the model's output on ``batch`` (default: computed here, in eval
    mode, without gradients). tokenizer: the tokenizer or processor, to check the pad token and
    ``vocab_size`` against. learning_rate, tuned_for: the reduction the learning rate was
    tuned for ("mean", the recipes').

    Usage: ``print(ctcbench.diagnose_batch(model, next(iter(trainer.get_train_dataloader()))))``.
    """
    import torch
    expect(hasattr(batch, "get") and batch.get("labels") is not None, "batch",
           "a dict with labels (the collator's output)",
           sorted(batch) if hasattr(batch, "keys") else type(batch).__name__)
    conv = read_conventions(model)
    if logits is None:
        inputs = {k: v for k, v in batch.items() if k != "labels"}
        training = model.training
        model.eval()
        try:
            with torch.no_grad():
                logits = model(**inputs).logits
        finally:
            model.train(training)
    return diagnose_ctc(logits, batch["labels"], frame_lengths(model, batch), conv,
                        tokenizer=tokenizer, learning_rate=learning_rate, tuned_for=tuned_for)
