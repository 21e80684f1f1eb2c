"""A small Keras 3 CTC training run with ``ctcbench.keras.Monitor``, on the backend that
``KERAS_BACKEND`` names; run as a script by test_monitors.py, one process per backend. Prints
the monitor's events (and with ``--timed`` the seconds per step with and without it) as one
JSON line.

    python keras_fit.py FAULT OUT_DIR      FAULT: none, softmax (a final softmax: probabilities
                                           passed as logits) or padded (labels padded with 0)
    python keras_fit.py FAULT OUT_DIR --timed
                                           and the seconds a step without the monitor and with
                                           it, each fit after one that paid the compiles
    python keras_fit.py losses OUT_DIR     learning rate 0, batches in order: the losses the
                                           monitor was handed and each batch's, by evaluate
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np

import keras

import ctcbench.keras

T, F, C, L, N = 24, 8, 6, 4, 96  # frames, features, classes (blank 0), labels, samples


def data(fault: str, rng):
    x = rng.normal(size=(N, T, F)).astype("float32")
    y = rng.integers(1, C, size=(N, L))  # every label a class: Keras' CTC counts the full width
    if fault == "padded":
        y[::2, L - 2:] = 0  # shorter labellings padded with 0, the blank: counted as labels
    return x, y


def model(fault: str):
    keras.utils.set_random_seed(0)
    out = keras.layers.Dense(C, activation="softmax" if fault == "softmax" else None)
    m = keras.Sequential([keras.Input((T, F)), keras.layers.Dense(32, activation="relu"), out])
    m.compile(optimizer=keras.optimizers.Adam(1e-3), loss=keras.losses.CTC())
    return m


def fit(fault: str, callbacks) -> float:
    x, y = data(fault, np.random.default_rng(0))
    m = model(fault)
    start = time.perf_counter()
    m.fit(x, y, batch_size=16, epochs=2, verbose=0, callbacks=callbacks(x, y))
    return (time.perf_counter() - start) / (2 * N // 16)


def losses(out_dir: str) -> None:
    """Two epochs at learning rate 0: each batch's loss is fixed, so ``evaluate`` on the batch
    afterwards is what ``fit`` computed for it, independently of the callback's logs."""
    x, y = data("none", np.random.default_rng(0))
    m = model("none")
    m.compile(optimizer=keras.optimizers.SGD(0.0), loss=keras.losses.CTC())
    monitor = ctcbench.keras.Monitor(x[:16], y[:16], out_dir, report=None)
    m.fit(x, y, batch_size=16, epochs=2, shuffle=False, verbose=0, callbacks=[monitor])
    per_batch = [float(m.evaluate(x[i:i + 16], y[i:i + 16], verbose=0)) for i in range(0, N, 16)]
    print(json.dumps({"monitor": monitor.watch.losses, "batches": per_batch * 2}))


def main(fault: str, out_dir: str, timed: str | None = None) -> None:
    if fault == "losses":
        return losses(out_dir)
    monitors = []

    def watched(x, y):
        monitors.append(ctcbench.keras.Monitor(x[:16], y[:16], out_dir, check_every=2,
                                               report=None))
        return monitors
    times = {}
    if timed == "--timed":
        fit(fault, lambda x, y: [])  # the first run pays the compiles
        times["step_s"] = fit(fault, lambda x, y: [])
    times["step_s_monitored"] = fit(fault, watched)
    events = [{"step": e.step, "kind": e.kind, "file": e.batch_file} for e in monitors[0].events]
    print(json.dumps({"backend": keras.backend.backend(), "events": events, **times}))


if __name__ == "__main__":
    main(*sys.argv[1:])
