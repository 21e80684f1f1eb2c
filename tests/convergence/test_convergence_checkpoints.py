"""checkpoint.pt: written at each eval, read back to resume or to predict; errors named."""
import pytest
import torch

from ctcbench.convergence.checkpoints import checkpoint_step, load_checkpoint, restore
from ctcbench.convergence.models import build_model
from ctcbench.convergence.optimizers import make_optimizer
from ctcbench.convergence.predict import model_from_checkpoint
from ctcbench.convergence.train import train_run
from conftest import tiny_train_config


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def test_checkpoint_errors(tmp_path):
    """A missing or foreign checkpoint file is a clear error."""
    with pytest.raises(FileNotFoundError, match="checkpoint: expected an existing file"):
        load_checkpoint(tmp_path / "none.pt")
    (tmp_path / "bad.pt").write_text("not a checkpoint")
    with pytest.raises(ValueError, match="checkpoint: expected a checkpoint.pt written by"):
        load_checkpoint(tmp_path / "bad.pt")


def test_checkpoint_step_is_none_without_a_readable_one(tmp_path):
    """The step of a run's last eval; None for a missing or damaged file, never an error."""
    train_run(tiny_train_config(steps=3, eval_every=2), tmp_path)
    assert checkpoint_step(tmp_path / "checkpoint.pt") == 3
    assert checkpoint_step(tmp_path / "none.pt") is None
    (tmp_path / "bad.pt").write_bytes(b"\x00" * 10)
    assert checkpoint_step(tmp_path / "bad.pt") is None


def test_restore_gives_back_the_state_and_refuses_one_that_does_not_fit(tmp_path):
    """A run's checkpoint restores into a model of its config (step, times, weights); into a
    model of other channels it is a ValueError, not torch's many-line RuntimeError."""
    cfg = tiny_train_config(steps=2, eval_every=2)
    train_run(cfg, tmp_path)
    state = load_checkpoint(tmp_path / "checkpoint.pt")
    model, saved = model_from_checkpoint(tmp_path / "checkpoint.pt")
    fresh = build_model(saved.model)
    step, cpu_s, wall_s = restore(state, fresh, *make_optimizer(fresh.parameters(), cfg))
    assert (step, cpu_s, wall_s) == (2, state["extra"]["cpu_s"], state["extra"]["wall_s"])
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(),
                                                 model.state_dict().values()))
    saved.model.channels = 8
    other = build_model(saved.model)
    with pytest.raises(ValueError, match="checkpoint: expected a state that fits the run's config"):
        restore(state, other, *make_optimizer(other.parameters(), cfg))
