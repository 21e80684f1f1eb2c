"""A small speech-like CTC task for the Transformers tests: each label is a tone (a sine of its
own period) in a noisy waveform, and a tiny randomly initialised ``Wav2Vec2ForCTC`` (two conv
layers, total stride 10; one transformer layer) learns to read them under ``Trainer`` in a few
seconds on one CPU thread. Nothing is downloaded: the tokenizer is built from a vocab file."""
from __future__ import annotations

import json
from dataclasses import dataclass

import numpy as np
import pytest
import torch

VOCAB = {"<pad>": 0, "a": 1, "b": 2, "c": 3, "<unk>": 4, "|": 5}  # <pad> is CTC's blank
# (the tokenizer adds <s> and </s>, 8 ids; the head has the vocabulary's 6: both unused)
PERIOD = {1: 4, 2: 8, 3: 16}  # samples per cycle of each label's tone
TONE, GAP = 80, 40  # samples of a tone, and of the silence after it
STRIDE = 10  # the conv feature encoder's total stride (5 x 2)


def tokenizer(tmp_path, vocab=VOCAB):
    from transformers import Wav2Vec2CTCTokenizer
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "vocab.json"
    path.write_text(json.dumps(vocab))
    pad = next(k for k in vocab if "pad" in k.lower())
    return Wav2Vec2CTCTokenizer(str(path), unk_token="<unk>", pad_token=pad,
                                word_delimiter_token="|")


def config(**changes):
    from transformers import Wav2Vec2Config
    settings = dict(vocab_size=len(VOCAB), hidden_size=32, num_hidden_layers=1,
                    num_attention_heads=2, intermediate_size=64, conv_dim=(32, 32),
                    conv_stride=(5, 2), conv_kernel=(10, 3), num_conv_pos_embeddings=8,
                    num_conv_pos_embedding_groups=4, mask_time_prob=0.0, pad_token_id=0,
                    ctc_loss_reduction="mean", feat_extract_norm="layer",
                    do_stable_layer_norm=True, hidden_dropout=0.0, attention_dropout=0.0,
                    activation_dropout=0.0, feat_proj_dropout=0.0, final_dropout=0.0,
                    layerdrop=0.0)
    return Wav2Vec2Config(**(settings | changes))


def model(seed: int, **changes):
    from transformers import Wav2Vec2ForCTC
    torch.manual_seed(seed)
    return Wav2Vec2ForCTC(config(**changes))


def samples(seed: int, n: int, *, labels=(1, 4)) -> list[dict]:
    """``n`` examples: 1 to 4 tones each, after 0-39 samples of silence, with noise."""
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        label = rng.integers(1, 4, rng.integers(*labels))
        parts = [np.zeros(rng.integers(0, 40))]
        for k in label:
            t = np.arange(TONE)
            parts += [np.sin(2 * np.pi * t / PERIOD[int(k)] + rng.uniform(0, 6)), np.zeros(GAP)]
        wave = np.concatenate(parts)
        wave = wave + 0.05 * rng.standard_normal(len(wave))
        out.append({"input_values": wave.astype(np.float32), "labels": label.tolist()})
    return out


def short(labels) -> dict:
    """An example whose waveform gives fewer encoder frames than it has labels: 30 samples,
    2 frames, for 3 or more labels."""
    return {"input_values": np.zeros(30, np.float32), "labels": list(labels)}


@dataclass
class Collator:
    """Pads a batch as a Transformers data collator does: waveforms with zeros and an
    attention mask, labels with ``label_pad`` (-100, or an id: the planted fault). Records
    each batch it makes, in order (one per optimizer step)."""

    label_pad: int = -100

    def __post_init__(self):
        self.batches = []

    def __call__(self, features):
        n = max(len(f["input_values"]) for f in features)
        L = max(len(f["labels"]) for f in features)
        x = torch.zeros(len(features), n)
        mask = torch.zeros(len(features), n, dtype=torch.long)
        y = torch.full((len(features), L), self.label_pad)
        for i, f in enumerate(features):
            x[i, :len(f["input_values"])] = torch.from_numpy(f["input_values"])
            mask[i, :len(f["input_values"])] = 1
            y[i, :len(f["labels"])] = torch.tensor(f["labels"])
        batch = {"input_values": x, "attention_mask": mask, "labels": y}
        self.batches.append(batch)
        return batch


def frames(samples_: int) -> int:
    """Encoder frames of a waveform, by the conv arithmetic written out here: each layer
    ``(length - kernel) // stride + 1``."""
    for kernel, stride in ((10, 5), (3, 2)):
        samples_ = (samples_ - kernel) // stride + 1
    return samples_


def train(tmp_path, net, data, collator, callbacks, *, steps: int, lr: float, seed: int = 0,
          processing_class=None, **args):
    from transformers import Trainer, TrainingArguments
    from transformers.utils import logging
    logging.set_verbosity_error()
    settings = dict(per_device_train_batch_size=8, max_steps=steps, learning_rate=lr,
                    logging_steps=10, report_to=[], save_strategy="no", seed=seed,
                    use_cpu=True, disable_tqdm=True, lr_scheduler_type="constant",
                    dataloader_num_workers=0)
    trainer = Trainer(model=net, args=TrainingArguments(str(tmp_path / "out"), **(settings | args)),
                      train_dataset=data, data_collator=collator, callbacks=callbacks,
                      processing_class=processing_class)
    trainer.train()
    return trainer


@pytest.fixture(autouse=True)
def one_thread():
    """torch on one thread for each test that imports this fixture (2 cores train fastest so)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)
