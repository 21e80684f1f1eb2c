"""The doctor on a Transformers CTC batch: ``diagnose`` on the loss's inputs as the model builds
them, its findings said in the model's terms (the config field or the collator line to
change), and the mistakes only a Transformers batch shows: labels padded with an id instead of
-100, the config's pad token against the tokenizer's, ``vocab_size`` against the tokenizer, and
``ctc_loss_reduction`` against what the learning rate was tuned for."""
from __future__ import annotations

import numpy as np

from ctcbench.core.arrays import to_numpy
from ctcbench.doctor.diagnose import diagnose
from ctcbench.doctor.findings import MAX_LISTED, Code, Finding, Report, rank
from ctcbench.transformers.conventions import IGNORE_INDEX, Conventions, kept, loss_targets

COLLATOR = ("pad the labels with -100 in the data collator: labels = labels_batch['input_ids']"
            ".masked_fill(labels_batch.attention_mask.ne(1), -100)")
CITE_PADDING = "huggingface/transformers#10145"  # the loss assumed -100 padding (labels >= 0)
CITE_INFINITY = "huggingface/transformers#28582"  # ctc_zero_infinity in the CTC recipe
CITE_VOCAB = "huggingface/transformers#12270"  # labels past vocab_size
CITE_REDUCTION = "huggingface/transformers#15196"  # Wav2Vec2Config's "sum" against "mean"


def diagnose_ctc(values, labels, input_lengths, conv: Conventions, *, tokenizer=None,
                 learning_rate: float | None = None, tuned_for: str = "mean",
                 layout: str = "NTC") -> Report:
    """Diagnose one Transformers CTC batch; returns a ranked ``Report``.

    values: the model's logits, ``(N, T, C)`` (``layout="NTC"``, as the model returns them) or
    ``(T, N, C)``; labels: ``(N, L)`` as the collator made them (-100 or an id as padding);
    input_lengths: ``(N,)`` encoder frames (``conventions.frame_lengths``); conv: the model's
    conventions; tokenizer: its tokenizer or processor, to check the pad token and the vocabulary
    against; learning_rate, tuned_for: the reduction ("mean" or "sum") the learning rate was
    tuned for (the fine-tuning recipes': "mean").
    """
    labels = to_numpy(labels, "labels")[0]
    targets, target_lengths = loss_targets(labels, conv)
    logits = to_numpy(values, "logits")[0].astype(np.float32)  # the loss: float32 log_softmax
    report = diagnose(logits=logits, targets=targets, input_lengths=input_lengths,
                      target_lengths=target_lengths, blank=conv.blank,
                      reduction=conv.reduction, layout=layout)
    findings = [_in_model_terms(f, conv, learning_rate) for f in report.findings
                if f.code != Code.REDUCTION or conv.reduction == "mean"]
    findings += [f for f in (_label_padding(labels, conv, _pad_id(tokenizer)),
                             _reduction(conv, target_lengths, learning_rate, tuned_for))
                 if f is not None]
    findings += _tokenizer_findings(tokenizer, conv)
    codes = {f.code for f in findings if f.severity == "error"}
    for f in findings:  # a cause in the config or the collator explains what it sets off
        if f.severity == "error" and f.code in (Code.BLANK_INDEX, Code.TARGET_LENGTHS_PADDED):
            f.explains = sorted(set(f.explains) | (codes & {Code.TARGET_CONTAINS_BLANK}))
    summary = dict(report.summary, pad_token_id=conv.blank, ctc_zero_infinity=conv.zero_infinity,
                   vocab_size=conv.vocab_size, masks_blank_labels=conv.masks_blank_labels)
    return Report(rank(findings), summary)


def _pad_id(tokenizer) -> int | None:
    tokenizer = getattr(tokenizer, "tokenizer", tokenizer)  # a processor holds its tokenizer
    return getattr(tokenizer, "pad_token_id", None)


def _in_model_terms(f: Finding, conv: Conventions, learning_rate) -> Finding:
    """The doctor's finding with the config field or collator line that fixes it."""
    if f.code == Code.INFEASIBLE_TARGET:
        if conv.zero_infinity:
            f.severity = "warning"
            f.message += (" config.ctc_zero_infinity is True, so the loss zeroes them: these "
                          "samples teach the model nothing.")
            f.fix = "drop or lengthen these samples (their input is too short for their labels)."
        else:
            f.message += " config.ctc_zero_infinity is False, so the batch's loss is inf."
            f.fix = ("set ctc_zero_infinity=True in the model's config (from_pretrained(..., "
                     "ctc_zero_infinity=True) or model.config.ctc_zero_infinity = True) so they "
                     "add 0 loss and 0 gradient instead of inf and then nan weights, or drop "
                     "inputs whose encoder output (model._get_feat_extract_output_lengths("
                     f"samples)) is shorter than their labels ({CITE_INFINITY}).")
    elif f.code == Code.TARGET_CONTAINS_BLANK:
        f.message += (f" The blank is config.pad_token_id = {conv.blank}; the loss keeps "
                      + ("labels other than -100 and the pad id." if conv.masks_blank_labels
                         else "every label >= 0."))
        f.fix = (f"{COLLATOR}; and map no character to the pad token (the tokenizer's "
                 "pad token must be config.pad_token_id and nothing else).")
    elif f.code == Code.TARGET_OUT_OF_RANGE:
        f.fix = (f"labels must be ids below config.vocab_size = {conv.vocab_size}: build the "
                 "model with vocab_size=len(processor.tokenizer) (the forward refuses larger "
                 f"labels: {CITE_VOCAB}).")
    elif f.code in (Code.BLANK_COLLAPSE, Code.TIME_INVARIANT):
        rate = f" (learning_rate = {learning_rate:g})" if learning_rate is not None else ""
        f.message += (f" In the model's terms it predicts only the pad token (config."
                      f"pad_token_id = {conv.blank}, CTC's blank).")
        f.fix = (f"a healthy run leaves this plateau; one that stays was mostly trained too "
                 f"hard{rate}: lower TrainingArguments.learning_rate (the recipes fine-tune at "
                 "1e-4 to 3e-4) and add warmup_steps; " + f.fix)
    elif f.code == Code.REDUCTION:
        f.fix = "config.ctc_loss_reduction = 'mean' is torch's; " + f.fix
    return f


def _label_padding(labels: np.ndarray, conv: Conventions, tokenizer_pad: int | None
                   ) -> Finding | None:
    """Labels padded with an id instead of -100: the trailing run of one value that the rows
    shorter than the batch's longest end in."""
    if labels.ndim != 2 or labels.shape[1] < 2 or (labels == IGNORE_INDEX).any():
        return None
    last = labels[:, -1]
    values, counts = np.unique(last, return_counts=True)
    pad = int(values[counts.argmax()])
    runs = np.array([_run(row, pad) for row in labels])
    known = pad in (conv.blank, tokenizer_pad)
    if runs.max() < 2 or (not known and (runs > 0).sum() < 2):
        return None
    padded = np.flatnonzero(runs)
    counted = kept(labels, conv) & (labels == pad)
    counted_tail = int(sum(counted[n, len(labels[n]) - runs[n]:].sum() for n in padded))
    names = f" (the tokenizer's pad token)" if pad == tokenizer_pad else ""
    evidence = {"pad_value": pad, "samples": padded.tolist()[:MAX_LISTED],
                "padding_per_sample": runs[padded].tolist()[:MAX_LISTED],
                "pad_token_id": conv.blank, "counted_by_the_loss": counted_tail}
    if counted_tail == 0:
        return Finding(
            Code.TARGET_LENGTHS_PADDED, "info",
            f"labels are padded with id {pad}{names}, not -100: this transformers' CTC loss "
            f"(ForCTCLoss) drops labels equal to the blank (config.pad_token_id = {conv.blank}), "
            "so the loss is right here; the models' loss before it kept every label >= 0 and "
            f"read the padding as blanks in the targets ({CITE_PADDING}), as does a loss of "
            "your own.",
            evidence, f"{COLLATOR}, so the batch means the same to every version and loss.")
    what = ("the blank, config.pad_token_id" if pad == conv.blank else
            f"not the blank (config.pad_token_id = {conv.blank}) but a class of its own")
    return Finding(
        Code.TARGET_LENGTHS_PADDED, "error",
        f"labels are padded with id {pad}{names}, not -100, and the loss counts the padding: "
        f"{counted_tail} padding positions in {len(padded)} samples become labels {pad}, "
        f"{what}, so the model is taught to emit padding ({CITE_PADDING}).",
        evidence, COLLATOR + ".")


def _run(row: np.ndarray, value: int) -> int:
    """How many of ``row``'s last entries equal ``value``."""
    differs = np.flatnonzero(row[::-1] != value)
    return int(differs[0]) if len(differs) else len(row)


def _tokenizer_findings(tokenizer, conv: Conventions) -> list[Finding]:
    if tokenizer is None:
        return []
    found, pad = [], _pad_id(tokenizer)
    tok = getattr(tokenizer, "tokenizer", tokenizer)
    if pad is not None and pad != conv.blank:
        found.append(Finding(
            Code.BLANK_INDEX, "error",
            f"config.pad_token_id = {conv.blank} is the CTC blank, but the tokenizer's pad token "
            f"{getattr(tok, 'pad_token', '')!r} is id {pad}: the loss treats class {conv.blank} "
            f"as the blank and id {pad} as a label, and the tokenizer's decode drops id {pad} "
            "as padding.",
            {"pad_token_id": conv.blank, "tokenizer_pad_token_id": pad},
            "build the model with pad_token_id=processor.tokenizer.pad_token_id "
            "(from_pretrained(..., pad_token_id=processor.tokenizer.pad_token_id)).", []))
    size = len(tok) if hasattr(tok, "__len__") else None
    if size is not None and size != conv.vocab_size:
        more = size > conv.vocab_size
        found.append(Finding(
            Code.TARGET_OUT_OF_RANGE, "warning" if more else "info",
            f"the tokenizer has {size} ids but the head config.vocab_size = {conv.vocab_size} "
            + (f"classes: a label of id {conv.vocab_size} or more is refused by the forward "
               f"(\"Label values must be <= vocab_size\", {CITE_VOCAB})." if more else
               f"classes: the model can emit ids {size}..{conv.vocab_size - 1} that no token "
               "decodes to."),
            {"tokenizer_ids": size, "vocab_size": conv.vocab_size},
            "build the model with vocab_size=len(processor.tokenizer)."))
    return found


def _reduction(conv: Conventions, target_lengths: np.ndarray, learning_rate, tuned_for: str
               ) -> Finding | None:
    """``ctc_loss_reduction`` other than the one the learning rate was tuned for: the factor
    between the two on this batch (N times the mean target length, for equal per-label loss)."""
    if conv.reduction == tuned_for:
        return None
    factor = float(len(target_lengths) * np.maximum(target_lengths, 1).mean())
    bigger = conv.reduction == "sum"
    rate = f" learning_rate = {learning_rate:g} was" if learning_rate is not None else \
        " the learning rate was"
    return Finding(
        Code.REDUCTION, "warning",
        f"config.ctc_loss_reduction = {conv.reduction!r} where{rate} tuned for {tuned_for!r}: "
        f"on this batch the loss and its gradient are about {factor:.3g} times "
        f"{'larger' if bigger else 'smaller'} (N x mean target length). Adam(W), Trainer's "
        "default, divides most of a constant factor out; gradient clipping (max_grad_norm), "
        "SGD and the logged loss do not"
        + (f" (Wav2Vec2Config's default is 'sum': {CITE_REDUCTION})." if bigger else "."),
        {"ctc_loss_reduction": conv.reduction, "tuned_for": tuned_for,
         "factor": round(factor, 3)},
        f"set ctc_loss_reduction={tuned_for!r} in the model's config, or tune the learning "
        f"rate for {conv.reduction!r} (and pass tuned_for={conv.reduction!r}).")
