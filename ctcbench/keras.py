"""``ctcbench.keras.Monitor``: the doctor's monitor (``ctcbench.Monitor``) as a Keras 3 callback,
on any Keras backend. Usage::

    model.compile(optimizer="adam", loss=keras.losses.CTC())
    model.fit(x, y, callbacks=[ctcbench.keras.Monitor(x[:32], y[:32], "monitor/")])

``fit`` hands a callback no batch, so the monitor keeps a probe batch of the training data (``x``,
``y``), and every ``check_every`` batches reads the model's output on it as the CTC loss reads
it: with ``keras.losses.CTC`` (the default ``lengths="keras"``) batch-major logits, every frame
of every sample and every label of ``y``'s padded width (Keras 3 passes the full widths as
lengths), blank = ``mask_index`` 0. A loss of your own gets ``lengths=fn``, ``fn(x, y, y_pred)
-> (input_lengths, target_lengths)``. ``logs["loss"]`` is Keras' running mean over the epoch
(checked on Keras 3.15: batch ``b``'s logs hold the mean of batches ``0..b``), so each batch's
own loss is recovered from two means, ``(b + 1) m_b - b m_(b-1)`` (the mean of the batches
since the last callback, when ``steps_per_execution`` runs several per call): the flat-window and
``loss-stall`` rules see the loss of each batch, not an average that trails it. No gradient norm
reaches a callback, so ``gradient-exploding`` is not watched here.
"""
from __future__ import annotations

import numpy as np

import keras

from ctcbench.doctor.monitor import Monitor as _Monitor


class Monitor(keras.callbacks.Callback):
    """Watch ``Model.fit`` on a CTC loss; reports as ``ctcbench.Monitor`` does (once per kind,
    with the step and the probe batch saved for ``ctcbench doctor``); ``events`` holds them.

    Args:
      x, y: a probe batch of the training data, as ``fit`` takes them (``y``: padded labels
        ``(N, L)``). out_dir, blank, check_every, window, flat_tol, report: as
        ``ctcbench.Monitor``. lengths: ``"keras"`` or ``fn(x, y, y_pred) -> (input_lengths,
        target_lengths)``. output: which of several model outputs holds the CTC logits (index
        or name). kind: ``"logits"`` (what ``keras.losses.CTC`` takes) or what your loss takes.
        stall_band, stall_after: as ``ctcbench.Monitor``.
    """

    def __init__(self, x, y, out_dir="ctcbench-monitor", *, blank: int = 0, lengths="keras",
                 output=None, kind: str = "logits", check_every: int = 25, window: int = 500,
                 flat_tol: float = 0.02, stall_band: float = 0.1, stall_after: int = 100,
                 report=print):
        super().__init__()
        self.x, self.y = x, np.asarray(y)
        self.lengths, self.output = lengths, output
        self.watch = _Monitor(out_dir, blank=blank, kind=kind, layout="NTC",
                              check_every=check_every, window=window, flat_tol=flat_tol,
                              stall_band=stall_band, stall_after=stall_after, report=report)
        self._batches = 0
        self._last = (-1, 0.0)  # (batch, logs["loss"]) of this epoch's previous callback

    @property
    def events(self):
        return self.watch.events

    def on_train_batch_end(self, batch, logs=None):
        mean = (logs or {}).get("loss")
        if mean is None:
            return
        # the mean of the batches since the last callback (one batch, unless the model runs
        # several per call: steps_per_execution), from the epoch's running means
        last, last_mean = self._last if batch > self._last[0] else (-1, 0.0)  # a new epoch
        loss = ((batch + 1) * float(mean) - (last + 1) * last_mean) / (batch - last)
        self._last = (batch, float(mean))
        step, self._batches = self._batches, self._batches + 1
        made = {}

        def values():  # the model's output on the probe batch, (N, T, C), once per step
            if "values" not in made:
                out = self.model(self.x, training=False)
                out = out if self.output is None else out[self.output]
                made["values"] = np.asarray(keras.ops.convert_to_numpy(out))
            return made["values"]

        def lengths():
            if "lengths" not in made:
                if self.lengths == "keras":  # keras.losses.CTC: the padded widths, every sample
                    N, L = self.y.shape
                    made["lengths"] = (np.full(N, values().shape[1]), np.full(N, L))
                else:
                    made["lengths"] = self.lengths(self.x, self.y, values())
            return [np.asarray(a, np.int64) for a in made["lengths"]]

        self.watch.step(loss, values, self.y, lambda: lengths()[0],
                        lambda: lengths()[1], step=step)
