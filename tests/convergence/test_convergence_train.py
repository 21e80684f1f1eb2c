"""Training runs: reproducible, resumable without changing the curve, and really learning."""
import json

import pytest
import torch

from ctcbench.convergence.checkpoints import load_checkpoint
from ctcbench.convergence.predict import model_from_checkpoint
from ctcbench.convergence.train import train_run
from ctcbench.convergence.trainconfig import TrainConfig
from ctcbench.runs.store import RowLog
from conftest import LEARN_STEPS, tiny_train_config


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def _curve(run_dir):
    return [{k: v for k, v in r.items() if k not in ("cpu_s", "wall_s")}
            for r in RowLog(run_dir / "curve.jsonl").rows()]


def test_run_writes_curve_checkpoint_and_summary(tmp_path):
    """A tiny run logs one row per eval (plus step 0) and leaves a loadable checkpoint."""
    summary = train_run(tiny_train_config(steps=5, eval_every=2), tmp_path)
    steps = [r["step"] for r in RowLog(tmp_path / "curve.jsonl").rows()]
    assert steps == [0, 2, 4, 5]
    for key in ("train_loss", "test_loss", "cer", "seq_acc", "blank_frac", "emitted", "grad_norm",
                "update_norm", "lr", "cpu_s", "wall_s"):
        assert key in RowLog(tmp_path / "curve.jsonl").rows()[-1]
    assert summary["steps"] == 5 and summary["checkpoint"] == str(tmp_path / "checkpoint.pt")
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    assert state["step"] == 5
    assert json.loads((tmp_path / "summary.json").read_text())["final_cer"] == summary["final_cer"]


def test_same_seed_same_curve_other_seed_other_curve(tmp_path):
    """Same seed => identical curve on CPU; another seed => a different one."""
    train_run(tiny_train_config(seed=3), tmp_path / "a")
    train_run(tiny_train_config(seed=3), tmp_path / "b")
    train_run(tiny_train_config(seed=4), tmp_path / "c")
    assert _curve(tmp_path / "a") == _curve(tmp_path / "b")
    assert _curve(tmp_path / "a") != _curve(tmp_path / "c")


def test_resume_reproduces_uninterrupted_curve(tmp_path):
    """Stopping after a checkpoint and resuming gives exactly the uninterrupted curve."""
    full = tiny_train_config(steps=6, eval_every=2, optimizer="adam", warmup=3)
    train_run(full, tmp_path / "full")
    # an "interrupted" run: stop at step 4, then add a half-written row past the checkpoint
    train_run(tiny_train_config(steps=4, eval_every=2, optimizer="adam", warmup=3), tmp_path / "cut")
    (tmp_path / "cut" / "summary.json").unlink()
    RowLog(tmp_path / "cut" / "curve.jsonl").append({"step": 5, "cer": 0.5})
    resumed = train_run(full, tmp_path / "cut", resume=True)
    assert _curve(tmp_path / "cut") == _curve(tmp_path / "full")
    assert resumed["steps"] == 6


def test_resume_of_finished_run_returns_summary(tmp_path):
    """Resuming a finished run does no work and returns the stored summary."""
    first = train_run(tiny_train_config(), tmp_path)
    assert train_run(tiny_train_config(), tmp_path, resume=True) == json.loads(
        (tmp_path / "summary.json").read_text()) == json.loads(json.dumps(first))


@pytest.mark.parametrize("name", ["linecnn", "linecnnlstm", "rescrnn", "perpos"])
def test_every_model_trains(tmp_path, name):
    """Every model runs through the loop and its metrics are finite."""
    cfg = tiny_train_config(steps=2, eval_every=2)
    cfg.model.name = name
    s = train_run(cfg, tmp_path)
    assert 0 <= s["final_cer"] and s["final_test_loss"] < float("inf")


def test_numpy_ctc_backend_trains_like_torch(tmp_path):
    """Training through ctcbench.torch with the float64 NumPy reference follows torch's native
    curve step by step: losses and gradient norms agree to float32 precision (rel 1e-5)."""
    for name in ("torch", "numpy"):
        train_run(tiny_train_config(steps=5, eval_every=1, optimizer="adam", ctc_backend=name),
                  tmp_path / name)
    t, n = (RowLog(tmp_path / name / "curve.jsonl").rows() for name in ("torch", "numpy"))
    assert [r["step"] for r in t] == [r["step"] for r in n] == list(range(6))
    for a, b in zip(t, n):
        for key in ("train_loss", "test_loss", "grad_norm"):
            if a["step"] > 0 or key == "test_loss":
                assert b[key] == pytest.approx(a[key], rel=1e-5), (a["step"], key)


def test_curriculum_draws_only_short_lines_for_its_steps(tmp_path, monkeypatch):
    """With curriculum_steps=3 and curriculum_len=1, the first three training batches hold
    only one-character lines; the later ones any length of the pool."""
    import ctcbench.convergence.train as train
    seen = []  # (pool, batch lengths) of every training batch made into tensors
    real = train.tensors
    monkeypatch.setattr(train, "tensors",
                        lambda pool, idx: seen.append((pool, pool.lengths[idx])) or real(pool, idx))
    cfg = tiny_train_config(steps=6, eval_every=6, curriculum_steps=3, curriculum_len=1)
    train_run(cfg, tmp_path / "run")
    train_pool = next(p for p, _ in seen if len(p) == cfg.data.train_size)
    batches = [lengths for p, lengths in seen if p is train_pool]
    assert len(batches) == 6
    assert all((b == 1).all() for b in batches[:3])
    assert any((b > 1).any() for b in batches[3:])


def test_curriculum_shorter_than_every_line_is_refused():
    """A curriculum whose length no training line has would draw from nothing."""
    cfg = tiny_train_config(curriculum_steps=5, curriculum_len=2)
    cfg.data.min_len = 3
    with pytest.raises(ValueError, match=r"curriculum_len: expected at least data.min_len \(3\)"):
        cfg.check()


@pytest.mark.parametrize("field,value,message", [
    ("optimizer", "lbfgs", "optimizer: expected one of adam, rmsprop, sgd, adamw, adadelta, got 'lbfgs'"),
    ("lr", -1.0, "lr: expected a finite positive number, got -1.0"),
    ("steps", 0, "steps: expected >= 1, got 0"),
    ("reduction", "none", "reduction: expected one of mean, sum, per-line, got 'none'"),
    ("curriculum_steps", -1, "curriculum_steps: expected a non-negative integer, got -1"),
])
def test_bad_training_config_is_named(field, value, message):
    """Bad training settings give 'expected X, got Y' errors naming the setting."""
    with pytest.raises(ValueError, match=message):
        TrainConfig(**{field: value}).check()


def test_short_run_learns(learned_run):
    """A short real run (about a minute) ends far below its starting CER: it leaves the blank
    plateau and reads held-out lines."""
    summary, run_dir, _ = learned_run
    rows = RowLog(run_dir / "curve.jsonl").rows()
    assert rows[0]["cer"] > 0.8
    assert summary["steps"] == LEARN_STEPS
    assert summary["final_cer"] < 0.25 * rows[0]["cer"]
    assert summary["plateau_end_step"] is not None
    model, cfg = model_from_checkpoint(summary["checkpoint"])
    assert cfg.steps == LEARN_STEPS


@pytest.mark.parametrize("kind", ["captcha", "digits"])
def test_other_datasets_train(tmp_path, kind):
    """Captcha and load_digits lines go through the same loop."""
    cfg = tiny_train_config(steps=2, eval_every=2)
    cfg.data.kind = kind
    s = train_run(cfg, tmp_path)
    assert s["data"] == kind and s["steps"] == 2
