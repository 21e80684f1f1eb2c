"""The monitor where people train: a Keras 3 ``fit`` on each installed Keras backend, a JAX/optax
step function and a PyTorch Lightning ``Trainer``, each a real training run: a planted fault is
reported at its step (once), healthy runs report nothing, and the saved batch gives the same
finding to ``ctcbench doctor``."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

import ctcbench
from ctcbench.doctor.load import load_inputs

HERE = Path(__file__).resolve().parent
KERAS_BACKENDS = {"jax": "jax", "tensorflow": "tensorflow", "torch": "torch"}  # name -> module


def _keras_run(backend: str, fault: str, out: Path) -> dict:
    for module in ("keras", KERAS_BACKENDS[backend]):
        if importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module}: pip install 'ctcbench[keras]' and the backend")
    env = {**os.environ, "KERAS_BACKEND": backend, "CUDA_VISIBLE_DEVICES": ""}
    done = subprocess.run([sys.executable, str(HERE / "keras_fit.py"), fault, str(out)],
                          capture_output=True, text=True, env=env, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("backend", list(KERAS_BACKENDS))
@pytest.mark.parametrize("fault, kind", [("none", None),
                                         ("softmax", "input:probabilities-not-log"),
                                         ("padded", "input:target-lengths-padded")])
@pytest.mark.long
def test_keras_fit_reports_a_planted_fault_at_step_0_and_a_healthy_run_never(tmp_path, backend,
                                                                           fault, kind):
    """A final softmax (probabilities where keras.losses.CTC takes logits), or labels padded
    with 0 (Keras 3's CTC counts every label of the padded width): reported at step 0, once;
    the same model and data without the fault: no report in 12 steps."""
    run = _keras_run(backend, fault, tmp_path)
    assert run["backend"] == backend
    assert [(e["step"], e["kind"]) for e in run["events"]] == ([] if kind is None else [(0, kind)])
    for event in run["events"]:
        again = ctcbench.diagnose(**load_inputs(event["file"]))
        assert again.errors[0].code == kind.removeprefix("input:")


@pytest.mark.long
def test_keras_monitor_sees_each_batchs_loss_not_the_epochs_running_mean(tmp_path):
    """Keras' logs["loss"] is the mean of the epoch so far; the monitor recovers each batch's
    own loss from it, which ``evaluate`` on that batch gives independently (learning rate 0,
    12 batches over two epochs, on the torch backend)."""
    run = _keras_run("torch", "losses", tmp_path)
    assert len(run["monitor"]) == len(run["batches"]) == 12
    np.testing.assert_allclose(run["monitor"], run["batches"], rtol=1e-4)
    assert np.ptp(run["batches"][:6]) > 0.01 * np.mean(run["batches"])  # the batches differ


def _optax_run(fault: str, out: Path, steps: int = 30) -> list:
    jax = pytest.importorskip("jax")
    optax = pytest.importorskip("optax")
    import jax.numpy as jnp
    rng = np.random.default_rng(0)
    N, T, F, C, L = 8, 20, 6, 5, 3
    x = jnp.asarray(rng.normal(size=(N, T, F)), jnp.float32)
    labels = jnp.asarray(rng.integers(1, C, size=(N, L)))
    logit_paddings, label_paddings = jnp.zeros((N, T)), jnp.zeros((N, L))
    if fault == "paddings":  # shorter labellings padded with 0 (the blank), paddings left 0
        labels = labels.at[::2, 1:].set(0)

    def logits_of(w, x):
        out = x @ w  # (N, T, C)
        return jax.nn.softmax(out) if fault == "softmax" else out

    def loss_fn(w):
        return optax.ctc_loss(logits_of(w, x), logit_paddings, labels, label_paddings).mean()

    w = jnp.asarray(rng.normal(size=(F, C)) * 0.1, jnp.float32)
    opt = optax.adam(1e-2)
    state = opt.init(w)
    monitor = ctcbench.Monitor(out, kind="logits", layout="NTC", check_every=5, report=None)
    loss_and_grads = jax.jit(jax.value_and_grad(loss_fn))  # compiled once, as a loop would
    for step in range(steps):
        loss, grads = loss_and_grads(w)
        monitor.optax_step(loss, logits_of(w, x), logit_paddings, labels, label_paddings,
                           grads=grads)
        updates, state = opt.update(grads, state)
        w = optax.apply_updates(w, updates)
    return monitor.events


@pytest.mark.parametrize("fault, kind", [("none", None),
                                         ("softmax", "input:probabilities-not-log"),
                                         ("paddings", "input:target-lengths-padded")])
def test_optax_step_reports_a_planted_fault_at_step_0_and_a_healthy_run_never(tmp_path, fault,
                                                                            kind):
    events = _optax_run(fault, tmp_path)
    assert [(e.step, e.kind) for e in events] == ([] if kind is None else [(0, kind)])
    for event in events:
        assert ctcbench.diagnose(**load_inputs(event.batch_file)).errors[0].code == \
            kind.removeprefix("input:")


def test_optax_step_refuses_a_monitor_of_another_convention(tmp_path):
    with pytest.raises(ValueError, match='Monitor: expected kind="logits", layout="NTC"'):
        ctcbench.Monitor(tmp_path).optax_step(0.0, np.zeros((1, 2, 3)), np.zeros((1, 2)),
                                              np.ones((1, 1), int), np.zeros((1, 1)))


def _lightning_run(fault: str, out: Path, steps: int = 12) -> list:
    pytest.importorskip("lightning", reason="needs lightning: pip install 'ctcbench[lightning]'")
    import lightning as L
    import torch
    import torch.nn.functional as F

    import ctcbench.lightning

    torch.manual_seed(0)
    N, T, D, C, S = 32, 20, 6, 5, 3
    x = torch.randn(N, T, D)
    targets = torch.randint(1, C, (N, S))
    lengths = torch.full((N,), T), torch.full((N,), S)

    class Tagger(L.LightningModule):
        def __init__(self):
            super().__init__()
            self.proj = torch.nn.Linear(D, C)

        def training_step(self, batch, batch_idx):
            xb, tb, il, tl = batch
            scores = self.proj(xb).transpose(0, 1)  # (T, N, C)
            log_probs = scores.log_softmax(0 if fault == "time-axis" else -1)
            loss = F.ctc_loss(log_probs, tb, il, tl)
            return {"loss": loss, "log_probs": log_probs, "targets": tb, "input_lengths": il,
                    "target_lengths": tl}

        def configure_optimizers(self):
            return torch.optim.Adam(self.parameters(), 1e-2)

    data = torch.utils.data.TensorDataset(x, targets, *lengths)
    monitor = ctcbench.lightning.Monitor(out, check_every=4, report=None)
    trainer = L.Trainer(max_steps=steps, accelerator="cpu", logger=False,
                        enable_checkpointing=False, enable_progress_bar=False,
                        enable_model_summary=False, callbacks=[monitor])
    trainer.fit(Tagger(), torch.utils.data.DataLoader(data, batch_size=8))
    return monitor.events


@pytest.mark.parametrize("fault, kind", [("none", None), ("time-axis", "input:softmax-axis")])
def test_lightning_reports_a_planted_fault_at_step_0_and_a_healthy_run_never(tmp_path, fault,
                                                                           kind):
    """log_softmax over the time axis in training_step: reported at step 0; healthy: never."""
    events = _lightning_run(fault, tmp_path)
    assert [(e.step, e.kind) for e in events] == ([] if kind is None else [(0, kind)])
