"""ctcbench.transformers.Monitor on real Trainer runs of a tiny random Wav2Vec2ForCTC on the tone
task (tones.py): nothing on a healthy run, and each planted fault reported once, at the step
where it shows, with the config or TrainingArguments field that fixes it. The expected steps
come from the batches the collator made, read independently of the monitor."""
from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")

import tones
from tones import one_thread  # noqa: F401 (autouse fixture)
from ctcbench.transformers import Monitor


STEPS = 150
WATCH = dict(check_every=10, window=60, flat_tol=0.05, stall_after=40)


def run(tmp_path, *, seed=0, lr=3e-3, steps=STEPS, label_pad=-100, data=None, changes=None,
        **args):
    data = tones.samples(seed, 8 * steps) if data is None else data
    monitor = Monitor(tmp_path / "monitor", report=None, **WATCH)
    collator = tones.Collator(label_pad)
    trainer = tones.train(tmp_path, tones.model(seed, **(changes or {})), data, collator,
                          [monitor], steps=steps, lr=lr, seed=seed,
                          processing_class=tones.tokenizer(tmp_path), **args)
    return monitor, collator, trainer


@pytest.mark.long
def test_a_healthy_run_is_not_reported(tmp_path):
    """The run learns (the logged loss falls below a tenth of its start) and nothing is
    reported."""
    monitor, _, trainer = run(tmp_path)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    assert losses[-1] < losses[0] / 10
    assert monitor.events == []
    assert not any("ctcbench_monitor" in h for h in trainer.state.log_history)


@pytest.mark.long
def test_a_too_short_input_without_zero_infinity_is_reported_where_it_enters(tmp_path):
    """One waveform too short for its labels: loss-non-finite at the first step whose batch
    holds it (counted from the collator's batches by the conv arithmetic), naming
    ctc_zero_infinity; reported once, also in state.log_history, with the batch saved."""
    data = tones.samples(0, 8 * STEPS)
    data[300] = tones.short([1, 2, 3])
    monitor, collator, trainer = run(tmp_path, data=data)
    expected = next(i for i, b in enumerate(collator.batches)
                    if any(tones.frames(int(m.sum())) < int((y >= 0).sum())
                           for m, y in zip(b["attention_mask"], b["labels"])))
    kinds = [(e.step, e.kind) for e in monitor.events]
    assert kinds == [(expected, "loss-non-finite")]
    assert "ctc_zero_infinity=True" in monitor.events[0].fix
    assert "infeasible-target" in monitor.events[0].message
    logged = [h for h in trainer.state.log_history if "ctcbench_monitor" in h]
    assert [(h["step"], h["ctcbench_monitor"]) for h in logged] == [(expected + 1,
                                                                      "loss-non-finite")]
    saved = np.load(monitor.events[0].batch_file)
    assert saved["labels"].shape == collator.batches[expected]["labels"].shape


@pytest.mark.long
def test_the_same_input_with_zero_infinity_is_not_reported(tmp_path):
    """With config.ctc_zero_infinity=True the short input adds no inf: no report."""
    data = tones.samples(0, 8 * STEPS)
    data[300] = tones.short([1, 2, 3])
    monitor, _, _ = run(tmp_path, data=data, changes={"ctc_zero_infinity": True})
    assert monitor.events == []


@pytest.mark.long
def test_a_learning_rate_that_collapses_to_the_pad_token_is_a_blank_plateau(tmp_path):
    """lr 0.1 (seed 0): the model predicts only <pad> from early on (greedy decoding of the collator's
    batches by an independent argmax shows it) and the plateau is reported once, after the
    window of flat steps, naming learning_rate; nothing else is reported."""
    monitor, collator, trainer = run(tmp_path, lr=0.1)
    assert [e.kind for e in monitor.events] == ["blank-plateau"]
    event = monitor.events[0]
    assert WATCH["window"] - 1 <= event.step <= STEPS
    assert "learning_rate = 0.1" in event.fix and "pad_token_id = 0" in event.fix
    model = trainer.model.eval()
    import torch
    batch = collator.batches[-1]
    with torch.no_grad():
        emitted = model(input_values=batch["input_values"],
                        attention_mask=batch["attention_mask"]).logits.argmax(-1)
    assert (emitted == 0).all()  # only the pad token, everywhere


@pytest.mark.long
def test_labels_padded_with_a_non_blank_id_are_reported_at_the_first_step(tmp_path):
    """Labels padded with id 5 (a pad id other than config.pad_token_id = 0, the blank, as
    when a vocabulary puts [PAD] last and the model is built without pad_token_id): the loss
    counts the padding as labels; reported at step 0 with the collator line, once."""
    monitor, collator, _ = run(tmp_path, label_pad=5, steps=20)
    first = collator.batches[0]["labels"]
    assert (first == 5).any()  # the fault is in the first batch
    assert [(e.step, e.kind) for e in monitor.events][:1] == [(0, "input:target-lengths-padded")]
    assert "masked_fill(labels_batch.attention_mask.ne(1), -100)" in monitor.events[0].fix
    assert len({e.kind for e in monitor.events}) == len(monitor.events)


@pytest.mark.long
def test_labels_padded_with_the_pad_id_are_masked_by_this_transformers(tmp_path):
    """Padding with the pad id = the blank: ForCTCLoss (transformers 5) drops those labels, so
    the run is healthy and not reported; its loss equals the -100 run's step for step."""
    masked, _, a = run(tmp_path / "pad", label_pad=0, steps=30)
    ignored, _, b = run(tmp_path / "ignore", label_pad=-100, steps=30)
    assert masked.events == [] and ignored.events == []
    loss = [[h["loss"] for h in t.state.log_history if "loss" in h] for t in (a, b)]
    assert loss[0] == pytest.approx(loss[1], rel=1e-5)


@pytest.mark.long
def test_attached_first_the_report_reaches_tensorboard(tmp_path):
    """With ``attach(trainer)`` TensorBoard's own callback (report_to) writes the report's
    ``ctcbench/<kind>`` scalar, read back from the event file by TensorBoard's reader."""
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator
    from transformers import Trainer, TrainingArguments

    monitor = Monitor(tmp_path / "monitor", report=None, **WATCH)
    collator = tones.Collator(5)  # labels padded with a non-blank id: reported at step 0
    args = TrainingArguments(str(tmp_path / "out"), per_device_train_batch_size=8, max_steps=5,
                             learning_rate=3e-3, logging_steps=10, report_to=["tensorboard"],
                             save_strategy="no", use_cpu=True, disable_tqdm=True)
    trainer = Trainer(model=tones.model(0), args=args, train_dataset=tones.samples(0, 40),
                      data_collator=collator, processing_class=tones.tokenizer(tmp_path))
    assert monitor.attach(trainer) is monitor
    trainer.train()
    assert monitor.events and monitor.events[0].kind == "input:target-lengths-padded"
    events = EventAccumulator(str(next((tmp_path / "out").rglob("events.out.tfevents.*")).parent))
    events.Reload()
    tags = events.Tags()["scalars"]
    assert "train/ctcbench/input:target-lengths-padded" in tags, tags
    assert [s.value for s in events.Scalars("train/ctcbench/input:target-lengths-padded")] == [1.0]
