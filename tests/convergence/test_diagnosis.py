"""--diagnose-every: the doctor's finding codes in the curve rows of a real training run,
flagging the repeated-vector model and leaving a healthy CRNN clean."""
import pytest
import torch

from ctcbench.convergence.data import DataConfig
from ctcbench.convergence.trainconfig import ModelConfig
from ctcbench.convergence.train import train_run
from ctcbench.runs.store import RowLog
from conftest import tiny_train_config


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def diagnosed(tmp_path, name):
    """Curve rows of a 40-step run of model ``name``, diagnosed every 20 steps."""
    data = DataConfig(train_size=128, test_size=32, min_len=2, max_len=4, width=64)
    cfg = tiny_train_config(model=ModelConfig(name=name, channels=8, hidden=32, batchnorm=True),
                            data=data, optimizer="adam", lr=3e-3, batch_size=16, steps=40,
                            eval_every=10, diagnose_every=20)
    train_run(cfg, tmp_path / name)
    return RowLog(tmp_path / name / "curve.jsonl").rows()


def test_repeated_vector_model_is_flagged_time_invariant(tmp_path):
    """The captcha bug (one pooled vector repeated over time) is reported as time-invariant
    once it has trained a little (steps 20 and 40); rows between diagnoses hold null."""
    rows = diagnosed(tmp_path, "repeatvec")
    assert [r["step"] for r in rows] == [0, 10, 20, 30, 40]
    assert [r["findings"] is None for r in rows] == [False, True, False, True, False]
    for r in rows[2::2]:
        assert "time-invariant" in r["findings"], r


def test_healthy_crnn_is_not_time_invariant(tmp_path):
    """A CRNN reading its features along the width is never flagged time-invariant."""
    rows = diagnosed(tmp_path, "crnn")
    found = [r["findings"] for r in rows if r["findings"] is not None]
    assert len(found) == 3 and not any("time-invariant" in f for f in found)


def test_diagnose_every_must_be_a_multiple_of_eval_every():
    """Diagnoses are recorded in eval rows, so their interval must be one of eval intervals."""
    with pytest.raises(ValueError, match=r"diagnose_every: expected a multiple of eval_every "
                                         r"\(10\), got 15"):
        tiny_train_config(eval_every=10, diagnose_every=15).check()
