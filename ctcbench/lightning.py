"""``ctcbench.lightning.Monitor``: the doctor's monitor (``ctcbench.Monitor``) as a PyTorch
Lightning callback. The loss's inputs reach it through what ``training_step`` returns::

    def training_step(self, batch, batch_idx):
        x, targets, input_lengths, target_lengths = batch
        log_probs = self(x).log_softmax(-1)                        # (T, N, C)
        loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths)
        return {"loss": loss, "log_probs": log_probs, "targets": targets,
                "input_lengths": input_lengths, "target_lengths": target_lengths}

    trainer = L.Trainer(callbacks=[ctcbench.lightning.Monitor("monitor/")])

The gradient norm is read after each backward pass; steps are the trainer's ``global_step``.
"""
from __future__ import annotations

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:  # the older package name
    from pytorch_lightning.callbacks import Callback

from ctcbench.doctor.monitor import Monitor as _Monitor, _grad_norm
from ctcbench.errors import expect

KEYS = ("log_probs", "targets", "input_lengths", "target_lengths")  # besides "loss"


class Monitor(Callback):
    """Watch a LightningModule's CTC training; reports as ``ctcbench.Monitor`` does (once per
    kind, with the step and the batch saved for ``ctcbench doctor``); ``events`` holds them.
    Arguments as ``ctcbench.Monitor``'s (``kind`` and ``layout`` say what ``log_probs`` is)."""

    def __init__(self, out_dir="ctcbench-monitor", **options):
        self.watch = _Monitor(out_dir, **options)
        self._norm = None

    @property
    def events(self):
        return self.watch.events

    def on_after_backward(self, trainer, pl_module):
        self._norm = _grad_norm(pl_module)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        expect(isinstance(outputs, dict) and set(KEYS) <= set(outputs), "training_step",
               f"a dict with loss, {', '.join(KEYS)} (the loss's inputs, for "
               "ctcbench.lightning.Monitor)",
               sorted(outputs) if isinstance(outputs, dict) else type(outputs).__name__)
        self.watch.step(outputs["loss"], *(outputs[k] for k in KEYS), grad_norm=self._norm,
                        step=trainer.global_step - 1)  # global_step counts the step just done
        self._norm = None
