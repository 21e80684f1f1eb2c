"""ctcbench.diagnose_batch and `ctcbench doctor --transformers-config` on batches of a tiny random
Wav2Vec2ForCTC (no training): each planted collator or config mistake named with its field,
checked against the model's own loss on the same batch (the real component, not a copy)."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("transformers")
pytest.importorskip("accelerate")
import torch
from click.testing import CliRunner

import ctcbench
import tones
from tones import one_thread  # noqa: F401 (autouse fixture)
from ctcbench.cli import main
from ctcbench.transformers.conventions import frame_lengths, read_conventions


@pytest.fixture(scope="module")
def net():
    torch.set_num_threads(1)
    return tones.model(0).eval()


def batch(label_pad=-100, items=None):
    return tones.Collator(label_pad)(items if items is not None else tones.samples(1, 6))


def model_loss(net, b, **config):
    for k, v in config.items():
        setattr(net.config, k, v)
    try:
        with torch.no_grad():
            return float(net(**b).loss)
    finally:
        for k in config:
            setattr(net.config, k, tones.config().to_dict()[k])


def errors(report):
    return [f.code.value for f in report.errors]


def test_a_well_made_batch_has_no_errors(net):
    report = ctcbench.diagnose_batch(net, batch())
    assert report.ok, report
    assert report.summary["pad_token_id"] == 0 and report.summary["masks_blank_labels"]


def test_frames_are_the_models_conv_arithmetic(net):
    """The frame counts equal the conv formula written out in the test, per sample."""
    b = batch()
    want = [tones.frames(int(m.sum())) for m in b["attention_mask"]]
    assert frame_lengths(net, b).tolist() == want


def test_the_label_rule_is_the_installed_loss(net):
    """Pad-id padding masked (info, nothing counted) exactly when the model's loss is the
    same with -100 padding; padding with a class id counted (error) when its loss differs."""
    same = model_loss(net, batch(0)) == pytest.approx(model_loss(net, batch()), rel=1e-6)
    assert read_conventions(net).masks_blank_labels == same
    report = ctcbench.diagnose_batch(net, batch(0))
    padded = [f for f in report.findings if f.code == "target-lengths-padded"]
    assert [f.severity for f in padded] == ["info" if same else "error"]
    assert model_loss(net, batch(5)) != pytest.approx(model_loss(net, batch()), rel=1e-3)
    report = ctcbench.diagnose_batch(net, batch(5))
    assert errors(report)[:1] == ["target-lengths-padded"]
    assert "masked_fill(labels_batch.attention_mask.ne(1), -100)" in report.errors[0].fix


def test_an_input_shorter_than_its_labels_names_ctc_zero_infinity(net):
    """The model's own loss is inf on it; the doctor names the config field, and with the
    field set the loss is finite and the finding a warning."""
    items = tones.samples(1, 5) + [tones.short([1, 2, 3])]
    b = batch(items=items)
    assert model_loss(net, b) == float("inf")
    report = ctcbench.diagnose_batch(net, b)
    assert errors(report) == ["infeasible-target"]
    assert "ctc_zero_infinity=True" in report.errors[0].fix
    assert np.isfinite(model_loss(net, b, ctc_zero_infinity=True))
    net.config.ctc_zero_infinity = True
    try:
        report = ctcbench.diagnose_batch(net, b)
    finally:
        net.config.ctc_zero_infinity = False
    assert report.ok and "infeasible-target" in report.codes


def test_a_tokenizer_whose_pad_is_not_the_blank(net, tmp_path):
    """A vocabulary with <pad> last (id 5) and the model's pad_token_id left at 0: the real
    tokenizer's pad id differs from the config's, named as blank-index."""
    vocab = {"a": 0, "b": 1, "c": 2, "<unk>": 3, "|": 4, "<pad>": 5}
    tok = tones.tokenizer(tmp_path, vocab)
    report = ctcbench.diagnose_batch(net, batch(), tokenizer=tok)
    assert errors(report) == ["blank-index"]
    assert report.errors[0].evidence["tokenizer_pad_token_id"] == tok.pad_token_id == 5
    assert "pad_token_id=processor.tokenizer.pad_token_id" in report.errors[0].fix


def test_a_sum_reduction_against_a_rate_tuned_for_mean(net):
    """ctc_loss_reduction='sum': a warning whose factor is within 2x of the model's own
    sum/mean loss ratio on the batch; none under 'mean'."""
    b = batch()
    real = model_loss(net, b, ctc_loss_reduction="sum") / model_loss(net, b)
    net.config.ctc_loss_reduction = "sum"
    try:
        report = ctcbench.diagnose_batch(net, b, learning_rate=3e-4)
    finally:
        net.config.ctc_loss_reduction = "mean"
    found = [f for f in report.findings if f.code == "reduction"]
    assert [f.severity for f in found] == ["warning"]
    assert 0.5 < found[0].evidence["factor"] / real < 2
    assert not [f for f in ctcbench.diagnose_batch(net, b).findings
                if f.code == "reduction" and f.severity == "warning"]


def test_config_errors_name_the_field():
    with pytest.raises(ValueError, match=r"^config.pad_token_id: expected the CTC blank's id"):
        read_conventions({"pad_token_id": None, "vocab_size": 6})
    with pytest.raises(ValueError, match=r"^config.ctc_loss_reduction: expected 'mean' or 'sum'"):
        read_conventions({"pad_token_id": 0, "vocab_size": 6, "ctc_loss_reduction": "none"})


def test_without_transformers_the_import_names_the_extra():
    code = ("import sys; sys.modules['transformers'] = None\n"
            "try:\n    import ctcbench.transformers\nexcept ImportError as e:\n    print(e)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
    assert "pip install 'ctcbench[transformers]'" in out


def test_doctor_reads_a_saved_batch_with_the_config(net, tmp_path):
    """A batch saved as the monitor saves it (time-major logits, raw labels, frames): the CLI
    with --transformers-config names ctc_zero_infinity and exits 1; --blank is refused."""
    items = tones.samples(1, 5) + [tones.short([1, 2, 3])]
    b = batch(items=items)
    with torch.no_grad():
        logits = net(input_values=b["input_values"], attention_mask=b["attention_mask"]).logits
    path = tmp_path / "step3-loss-non-finite.npz"
    np.savez(path, logits=logits.transpose(0, 1).numpy(), targets=np.zeros((6, 1), np.int64),
             input_lengths=frame_lengths(net, b), target_lengths=np.ones(6, np.int64),
             labels=b["labels"].numpy())
    net.config.to_json_file(tmp_path / "config.json")
    result = CliRunner().invoke(main, ["doctor", str(path), "--transformers-config",
                                       str(tmp_path / "config.json")])
    assert result.exit_code == 1, result.output
    assert "infeasible-target" in result.output and "ctc_zero_infinity=True" in result.output
    refused = CliRunner().invoke(main, ["doctor", str(path), "--transformers-config",
                                        str(tmp_path / "config.json"), "--blank", "3"])
    assert refused.exit_code == 2 and "--blank: expected the model's own conventions" in \
        refused.output
