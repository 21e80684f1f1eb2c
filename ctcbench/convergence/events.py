"""TensorBoard event files of a convergence run folder (``ctcbench convergence --tensorboard``).

One TensorBoard run per training run, in ``<DIR>/<run name>/`` (``DIR`` defaults to
``<run folder>/tensorboard``), written from the run's ``curve.jsonl`` and ``config.json``:

  scalars   every value of every curve row, at the row's step, tagged ``loss/train``,
            ``loss/test``, ``eval/cer``, ``eval/seq_acc``, ``eval/blank_frac``,
            ``eval/emitted``, ``optim/grad_norm``, ``optim/update_norm``, ``optim/lr``
            (a value the row does not have, like the train loss at step 0, is left out)
  hparams   the run's full config, flattened to dotted keys (``model.name``), for
            TensorBoard's HParams dashboard; its metrics are the scalar tags above.

Since the files are made from the run folder, they can be (re)written for any folder, finished,
resumed or interrupted; earlier event files in a run's subfolder are replaced.

The events are written with TensorBoard's own record writer and protos rather than
``torch.utils.tensorboard``, which imports all of TensorFlow (seconds, and log noise) when it
happens to be installed.
"""
from __future__ import annotations

import json
import socket
import time
from pathlib import Path

from ctcbench.convergence.curve import CURVE_FLOATS
from ctcbench.runs.store import RowLog

INSTALL = "pip install 'ctcbench[tensorboard]'"

# curve.jsonl field -> TensorBoard tag
SCALAR_TAGS = {"train_loss": "loss/train", "test_loss": "loss/test", "cer": "eval/cer",
               "seq_acc": "eval/seq_acc", "blank_frac": "eval/blank_frac",
               "emitted": "eval/emitted", "grad_norm": "optim/grad_norm",
               "update_norm": "optim/update_norm", "lr": "optim/lr"}


def check_tensorboard(out=None) -> None:
    """Raise ``ValueError`` naming ``--tensorboard`` unless the tensorboard package can be
    imported (the message gives the install command) and ``out``, if given, is not a file.
    Checked before training, so neither can fail a finished run."""
    if out and Path(out).exists() and not Path(out).is_dir():
        raise ValueError(f"--tensorboard: expected a folder for the event files, got "
                         f"{str(out)!r} (a file)")
    try:
        import tensorboard.plugins.hparams.summary_v2  # noqa: F401
        import tensorboard.summary.writer.record_writer  # noqa: F401
    except ImportError:
        raise ValueError(f"--tensorboard: expected the tensorboard package, got none installed "
                         f"(install it with: {INSTALL})") from None


def flat_config(config: dict, prefix: str = "") -> dict:
    """``{"model": {"name": "crnn"}}`` -> ``{"model.name": "crnn"}``; values that are not
    bool, int, float or str (None, lists) become their JSON text, as hparams must be scalars."""
    out = {}
    for key, value in config.items():
        if isinstance(value, dict):
            out.update(flat_config(value, f"{prefix}{key}."))
        elif isinstance(value, (bool, int, float, str)):
            out[prefix + key] = value
        else:
            out[prefix + key] = json.dumps(value)
    return out


def write_run_events(run: Path, folder: Path) -> Path:
    """The event file of one training run folder ``run`` (``curve.jsonl``, ``config.json``),
    written into ``folder``; returns its path."""
    from tensorboard.compat.proto import event_pb2, summary_pb2
    from tensorboard.plugins.hparams.summary_v2 import hparams_pb
    from tensorboard.summary.writer.record_writer import RecordWriter

    rows = RowLog(run / "curve.jsonl").rows(floats=CURVE_FLOATS)
    config = json.loads((run / "config.json").read_text())
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("events.out.tfevents.*"):  # a rewrite replaces, never duplicates
        old.unlink()
    now = time.time()
    path = folder / f"events.out.tfevents.{int(now)}.{socket.gethostname()}.ctcbench"
    with path.open("wb") as f:
        writer = RecordWriter(f)

        def write(**fields) -> None:
            writer.write(event_pb2.Event(wall_time=now, **fields).SerializeToString())

        write(file_version="brain.Event:2")
        write(step=0, summary=hparams_pb(flat_config(config), trial_id=run.name,
                                         start_time_secs=now))
        for row in rows:
            values = [summary_pb2.Summary.Value(tag=tag, simple_value=float(row[key]))
                      for key, tag in SCALAR_TAGS.items() if row.get(key) is not None]
            write(step=int(row["step"]), summary=summary_pb2.Summary(value=values))
        writer.flush()
    return path


def write_events(run_dir, out=None) -> Path:
    """Event files for every training run of the convergence run folder ``run_dir`` that has
    logged an eval, one subfolder per run under ``out`` (default ``run_dir/tensorboard``);
    returns ``out``. Raises ``ValueError`` naming ``--tensorboard`` when tensorboard is missing."""
    check_tensorboard(out)
    run_dir = Path(run_dir)
    out = Path(out) if out else run_dir / "tensorboard"
    runs = sorted(p for p in (run_dir / "runs").glob("*") if (p / "curve.jsonl").is_file())
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ValueError(f"--tensorboard: expected a folder that exists or can be created, got "
                         f"{str(out)!r} ({exc.strerror})") from None
    for run in runs:
        write_run_events(run, out / run.name)
    return out
