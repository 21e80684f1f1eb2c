"""A ``*ForCTC`` model's CTC conventions, read from its config and its loss, and the loss's
inputs rebuilt from a Transformers batch exactly as the model builds them.

Shape letters: ``N`` batch, ``S`` input samples, ``T`` encoder frames, ``C`` classes
(``config.vocab_size``), ``L`` padded label width.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ctcbench.core.arrays import to_numpy
from ctcbench.errors import expect

IGNORE_INDEX = -100  # the label the model's loss drops (torch's CrossEntropy convention)
REDUCTIONS = ("mean", "sum")  # a training loss's: ctc_loss_reduction's values


@dataclass(frozen=True)
class Conventions:
    """blank: ``config.pad_token_id`` (the pad token is CTC's blank); reduction:
    ``config.ctc_loss_reduction``; zero_infinity: ``config.ctc_zero_infinity``; vocab_size:
    the head's classes; masks_blank_labels: the loss drops labels equal to the blank as well
    as -100 (transformers' ``ForCTCLoss``), else only negative labels (``labels >= 0``, the
    rule of the models' own loss before it)."""

    blank: int
    reduction: str
    zero_infinity: bool
    vocab_size: int
    masks_blank_labels: bool

    def to_dict(self) -> dict:
        return dict(vars(self))


def read_conventions(source, *, masks_blank_labels: bool | None = None) -> Conventions:
    """The conventions of ``source``: a ``*ForCTC`` model, its config, a dict of it or the
    path of its ``config.json``. ``masks_blank_labels``: the loss's label rule, when known
    (else probed on the model's loss, or on this transformers' ``ForCTCLoss``)."""
    model = source if hasattr(source, "config") else None
    config = _config_dict(source.config if model is not None else source)
    blank = config.get("pad_token_id")
    expect(isinstance(blank, int) and not isinstance(blank, bool), "config.pad_token_id",
           "the CTC blank's id, an int (the pad token is the blank)", repr(blank))
    reduction = config.get("ctc_loss_reduction", "sum")  # Wav2Vec2Config's default
    expect(reduction in REDUCTIONS, "config.ctc_loss_reduction", "'mean' or 'sum'", repr(reduction))
    vocab = config.get("vocab_size")
    expect(isinstance(vocab, int) and vocab > blank, "config.vocab_size",
           f"an int above pad_token_id = {blank}", repr(vocab))
    masks = _loss_masks_blank(model) if masks_blank_labels is None else bool(masks_blank_labels)
    return Conventions(blank, reduction, bool(config.get("ctc_zero_infinity", False)), vocab,
                       masks)


def _config_dict(config) -> dict:
    if isinstance(config, dict):
        return config
    if isinstance(config, (str, Path)):
        path = Path(config)
        expect(path.is_file(), "config", "a model's config.json", repr(str(path)))
        try:
            return json.loads(path.read_text(encoding="utf-8"))
        except ValueError as exc:
            raise ValueError(f"{path.name}: expected a model's config.json, got invalid JSON "
                             f"({exc})") from None
    expect(hasattr(config, "to_dict"), "config", "a transformers PretrainedConfig, a dict or "
           "a config.json path", type(config).__name__)
    return config.to_dict()


def _loss_masks_blank(model) -> bool:
    """Whether the CTC loss in use drops labels equal to the blank: tried on the model's
    ``loss_function`` (or this transformers' ``ForCTCLoss``) with one label padded by the
    blank against the same label padded by -100."""
    import torch
    try:
        loss = getattr(model, "loss_function", None) if model is not None else None
        if loss is None:
            from transformers.loss.loss_ctc import ForCTCLoss as loss
        if getattr(loss, "__name__", "") != "ForCTCLoss":
            return False
        logits, lengths = torch.zeros(1, 3, 3), torch.tensor([3])
        padded = [float(loss(logits=logits, labels=torch.tensor([[1, fill]]), logit_lengths=lengths,
                             blank_token_id=0, reduction="sum")) for fill in (0, IGNORE_INDEX)]
    except Exception:  # an older transformers: the models' own loss, labels >= 0
        return False
    return padded[0] == padded[1]


def loss_targets(labels, conv: Conventions) -> tuple[np.ndarray, np.ndarray]:
    """``(targets (N, L'), target_lengths (N,))``: the labels the loss keeps, each row's moved
    to its front (padded with the blank), as the model's loss selects them."""
    labels = to_numpy(labels, "labels")[0]
    expect(labels.ndim == 2 and labels.dtype.kind in "iu", "labels",
           "an integer (N, L) array", f"{labels.dtype} of shape {labels.shape}")
    keep = kept(labels, conv)
    lengths = keep.sum(1).astype(np.int64)
    targets = np.full((len(labels), max(int(lengths.max(initial=0)), 1)), conv.blank, np.int64)
    for n, row in enumerate(labels):
        targets[n, :lengths[n]] = row[keep[n]]
    return targets, lengths


def kept(labels: np.ndarray, conv: Conventions) -> np.ndarray:
    """``(N, L)`` bool: the labels the loss counts."""
    if conv.masks_blank_labels:
        return (labels != IGNORE_INDEX) & (labels != conv.blank)
    return labels >= 0


def frame_lengths(model, batch) -> np.ndarray:
    """``(N,)`` encoder frames per sample, as the model computes them for its loss: its
    ``_get_feat_extract_output_lengths`` of the attention mask's sum (every sample as long
    as the padded input when there is no mask)."""
    import torch
    mask = batch.get("attention_mask")
    if mask is None:
        x = batch.get("input_values", batch.get("input_features"))
        expect(x is not None, "batch", "input_values or input_features", sorted(batch))
        raw = torch.full((x.shape[0],), x.shape[-1] if x.ndim == 2 else x.shape[1])
    else:
        raw = torch.as_tensor(mask).sum(-1)
    with torch.no_grad():
        return model._get_feat_extract_output_lengths(raw).long().cpu().numpy()
