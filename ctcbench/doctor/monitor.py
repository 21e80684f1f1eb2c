"""A watcher for a user's own CTC training loop: it reports once per kind of trouble (not
every step), with the step, the evidence, and the batch saved as a ``ctcbench doctor`` file.
Any framework's arrays: torch, JAX (``optax_step``, optax's batch-major logits and paddings),
NumPy; ``ctcbench.keras.Monitor`` and ``ctcbench.lightning.Monitor`` are callbacks around it.

Usage, after ``loss.backward()`` (so the gradient is there)::

    monitor = ctcbench.Monitor("monitor/", blank=0)
    for step, (x, targets, input_lengths, target_lengths) in enumerate(loader):
        log_probs = model(x).log_softmax(-1)                       # (T, N, C)
        loss = F.ctc_loss(log_probs, targets, input_lengths, target_lengths)
        optimizer.zero_grad(); loss.backward()
        monitor.step(loss, log_probs, targets, input_lengths, target_lengths, model=model)
        optimizer.step()

Kinds reported: ``loss-non-finite``, ``loss-negative``, ``gradient-exploding`` (the gradient
norm past ``grad_factor`` times its running median, or non-finite), ``blank-plateau`` (the loss
flat over the last ``window`` steps while the doctor finds the blank plateau or time-invariant
frames), ``loss-stall`` (the model left the blank plateau, but ``stall_after`` steps later the
loss is still within ``stall_band`` of the plateau's level, which has then held at least half
the steps watched: a stall that ends is still one) and ``input:<code>`` for each error the doctor finds
in the batch (``time-invariant``, an error of the model's state, once two looks in a row find
it). The doctor looks at the batch every ``check_every`` steps, starting with the first.
"""
from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ctcbench.core.arrays import to_numpy
from ctcbench.doctor.config import DEFAULTS
from ctcbench.doctor.diagnose import diagnose
from ctcbench.doctor.findings import Code, Trait, codes_with
from ctcbench.core.layouts import LAYOUTS
from ctcbench.doctor.load import VALUE_KEYS
from ctcbench.errors import expect, one_of

PLATEAU_CODES = codes_with(Trait.PLATEAU)
MODEL_STATE = codes_with(Trait.MODEL_STATE)  # errors an untrained model can show for a moment:
# reported when two looks in a row find them


@dataclass
class Event:
    """One report: the step, what kind of trouble, the evidence, the saved batch."""

    step: int
    kind: str
    message: str
    evidence: dict
    batch_file: str
    fix: str = ""  # what to change, where a framework's wrapper knows (ctcbench.transformers)

    def line(self) -> str:
        return (f"ctcbench monitor: step {self.step}: {self.kind}: {self.message} "
                f"(batch saved: ctcbench doctor {self.batch_file})")


class Monitor:
    """Watch the loss, the gradient and the batch of a torch CTC training loop.

    Args:
      out_dir: where batches are saved (``step<k>-<kind>.npz``, loadable by ``ctcbench doctor``).
      blank: the blank index the loss uses. reduction: the loss's reduction (for the doctor).
      check_every: run the doctor on the batch every this many steps (and on the first).
      window: steps over which a flat loss counts as a plateau (healthy CTC runs sit on the
        blank plateau for a few hundred steps); flat_tol: the relative change allowed between
        the means of the window's two halves.
      stall_band, stall_after: a loss within ``stall_band`` (a fraction) of the blank
        plateau's level is still on it; ``stall_after`` steps after the first look that no
        longer finds the plateau, such a loss is a stall if the plateau's level has held half
        the steps watched.
      grad_factor: a gradient norm this many times its running median is exploding.
      report: called with each :class:`Event` (default: print its line).
      kind: what ``step`` is handed, ``"log_probs"`` (torch's ctc_loss), ``"logits"`` (optax,
        Keras, TF) or ``"probs"``; layout: ``"TNC"`` (time-major) or ``"NTC"`` (batch-major).
        A saved batch is time-major, so ``ctcbench doctor FILE`` reads it as it is.
      diagnose: the look at a batch, ``fn(values, targets, input_lengths, target_lengths,
        **extra) -> Report`` with the values time-major (default: the doctor's ``diagnose``
        with this ``blank``, ``reduction`` and ``kind``); a framework's wrapper passes its own.
    """

    def __init__(self, out_dir="ctcbench-monitor", *, blank: int = 0,
                 reduction: str = DEFAULTS.reduction,
                 check_every: int = 25, window: int = 500, flat_tol: float = 0.02,
                 stall_band: float = 0.1, stall_after: int = 100, grad_factor: float = 10.0,
                 report=print, kind: str = "log_probs", layout: str = DEFAULTS.layout,
                 diagnose=None):
        one_of("kind", [kind], VALUE_KEYS)
        one_of("layout", [layout], LAYOUTS)
        self.out_dir = Path(out_dir)
        self.blank, self.reduction, self.kind, self.layout = blank, reduction, kind, layout
        self.check_every, self.window, self.flat_tol = check_every, window, flat_tol
        self.stall_band, self.stall_after = stall_band, stall_after
        self.grad_factor = grad_factor
        self.report, self.diagnose = report, diagnose
        self.events: list[Event] = []
        self.looks: list[tuple[int, tuple[str, ...]]] = []  # (step, the doctor's codes) each look
        self._reported: set[str] = set()
        self._losses: deque = deque(maxlen=window)
        self._norms: deque = deque(maxlen=200)
        self._step = -1
        self._first_step = None  # the first step watched (``step=`` may start anywhere)
        self._model_state: set[str] = set()  # model-state errors found at the last look
        self._plateau = _Plateau()  # the blank plateau the doctor's looks have found

    @property
    def losses(self) -> list[float]:
        """The last ``window`` finite losses handed to :meth:`step`, oldest first."""
        return list(self._losses)

    def step(self, loss, log_probs, targets, input_lengths, target_lengths, *, model=None,
             grad_norm: float | None = None, step: int | None = None,
             extra: dict | None = None) -> list[Event]:
        """Look at one training step; returns the events first reported at this step.

        loss: the loss tensor (or float) of the step. log_probs: ``(T, N, C)`` as handed to the
        loss (the monitor's ``kind`` in its ``layout``); it, the targets and the lengths may
        each be a function that returns it, called only when the doctor looks or a batch is
        saved. model: a torch module whose ``.grad`` norm is read (or pass ``grad_norm``).
        extra: more named arrays (or functions returning them), saved with the batch and
        handed to ``diagnose``.
        """
        self._step = self._step + 1 if step is None else int(step)
        self._first_step = self._step if self._first_step is None else self._first_step
        batch = _Batch(log_probs, (targets, input_lengths, target_lengths), self.layout, extra)
        new = []
        value = float(to_numpy(loss, "loss")[0].astype(np.float64).mean())
        if not np.isfinite(value):
            new += self._event("loss-non-finite", f"the loss is {value}", {"loss": value}, batch)
        elif value < 0:
            new += self._event("loss-negative", f"the loss is {value:.4g} < 0, impossible for a "
                               "negative log-likelihood", {"loss": value}, batch)
        norm = _grad_norm(model) if grad_norm is None and model is not None else grad_norm
        if norm is not None:
            new += self._gradient(float(norm), batch)
        if np.isfinite(value):
            self._losses.append(value)
        if self._step % self.check_every == 0:  # the doctor costs a loss evaluation or two
            new += self._doctor(batch)
        return new

    def optax_step(self, loss, logits, logit_paddings, labels, label_paddings, *, grads=None,
                   step: int | None = None) -> list[Event]:
        """:meth:`step` in optax's convention (``optax.ctc_loss``): ``logits (N, T, C)``,
        ``logit_paddings (N, T)`` and ``label_paddings (N, L)`` 1.0 on padding, ``labels
        (N, L)``; ``grads``: the step's gradient pytree (its global norm is watched). Needs
        a monitor made with ``kind="logits", layout="NTC"``."""
        expect((self.kind, self.layout) == ("logits", "NTC"), "Monitor", 'kind="logits", '
               'layout="NTC" for optax_step', f"kind={self.kind!r}, layout={self.layout!r}")
        input_lengths = np.rint((1 - to_numpy(logit_paddings, "logit_paddings")[0]).sum(1))
        target_lengths = np.rint((1 - to_numpy(label_paddings, "label_paddings")[0]).sum(1))
        norm = None
        if grads is not None:
            import jax
            norm = float(np.sqrt(sum(float((np.asarray(g, np.float64) ** 2).sum())
                                     for g in jax.tree_util.tree_leaves(grads))))
        return self.step(loss, logits, labels, input_lengths.astype(np.int64),
                         target_lengths.astype(np.int64), grad_norm=norm, step=step)

    # -- checks ------------------------------------------------------------------------------
    def _gradient(self, norm: float, batch) -> list[Event]:
        events = []
        median = float(np.median(self._norms)) if len(self._norms) >= 10 else None
        if not np.isfinite(norm):
            events = self._event("gradient-exploding", f"the gradient norm is {norm}",
                                 {"grad_norm": norm}, batch)
        elif median and norm > self.grad_factor * median:
            events = self._event(
                "gradient-exploding", f"the gradient norm {norm:.4g} is {norm / median:.3g}x its "
                f"running median {median:.4g}", {"grad_norm": norm, "median": median}, batch)
        if np.isfinite(norm):
            self._norms.append(norm)
        return events

    def _plateau_suspected(self) -> bool:
        if "blank-plateau" in self._reported or len(self._losses) < self.window:
            return False
        losses = np.array(self._losses)  # per-batch losses are noisy: compare the halves' means
        first, second = losses[: len(losses) // 2].mean(), losses[len(losses) // 2:].mean()
        return float(abs(first - second)) <= self.flat_tol * max(abs(first), 1e-12)

    def _doctor(self, batch) -> list[Event]:
        values, targets, input_lengths, target_lengths = batch.arrays()
        if self.diagnose is None:
            report = diagnose(**{self.kind: values}, targets=targets,
                              input_lengths=input_lengths, target_lengths=target_lengths,
                              blank=self.blank, reduction=self.reduction)
        else:
            report = self.diagnose(values, targets, input_lengths, target_lengths,
                                   **batch.extra())
        self.looks.append((self._step, tuple(report.codes)))
        events, model_state = [], set()
        explained = {c for f in report.errors for c in f.explains}  # one event per cause
        for f in report.findings:
            if f.severity != "error" or f.code in explained:
                continue
            if f.code == Code.NON_FINITE and "loss-non-finite" in self._reported:
                continue  # the weights a non-finite loss's step made nan: that event said it
            if f.code in MODEL_STATE:
                model_state.add(f.code)
                if f.code not in self._model_state:
                    continue
            events += self._event(f"input:{f.code}", f.message, f.evidence, batch)
        self._model_state = model_state
        found = [f for f in report.findings if f.code in PLATEAU_CODES]
        events += self._stall(bool(found), batch)
        if found and self._plateau_suspected():
            losses = np.array(self._losses)
            events += self._event(
                "blank-plateau", f"the loss has stayed flat (mean {losses.mean():.4g}, within "
                f"{self.flat_tol:.0%} between halves) for {len(losses)} steps and the doctor "
                f"finds {found[0].code}: "
                f"{found[0].message}", {"loss_mean": float(losses.mean()),
                                        "steps": len(losses), **found[0].evidence},
                batch)
        return events

    def _stall(self, on_plateau: bool, batch) -> list[Event]:
        """``loss-stall``: the model has left the blank plateau (the doctor no longer finds it)
        but, ``stall_after`` steps on, the loss is still within ``stall_band`` of the level it
        had there. A healthy run's loss is already falling when the plateau ends (seed
        scenarios: below the band by the first look without it); the captcha stall's stays
        near 16 for hundreds of steps while the model emits labels (docs/doctor.md)."""
        if "loss-stall" in self._reported or not self._losses:
            return []
        recent = float(np.mean(list(self._losses)[-2 * self.check_every:]))
        plateau = self._plateau
        if on_plateau:
            plateau.on(self._step, recent)
            return []
        if plateau.start is None:
            return []
        plateau.left(self._step)
        level = float(np.median(plateau.levels))
        if abs(recent - level) > self.stall_band * level:  # fell (the plateau was the run's
            self._plateau = _Plateau()  # start) or rose: either way not on the plateau
            return []
        since, held = self._step - plateau.end, self._step - plateau.start
        watched = self._step - self._first_step + 1
        if since < self.stall_after or 2 * held < watched:
            return []
        values, _, input_lengths, _ = batch.arrays()
        frames = to_numpy(values, self.kind)[0]  # (T, N, C) time-major
        valid = np.arange(len(frames))[:, None] < to_numpy(input_lengths, "input_lengths")[0]
        emitting = float((frames.argmax(-1) != self.blank)[valid].mean()) if valid.any() else 0.0
        return self._event(
            "loss-stall", f"the model left the blank plateau at step {plateau.end} (it emits "
            f"labels on {emitting:.0%} of the frames) but {since} steps later the loss, "
            f"{recent:.4g}, is still within {self.stall_band:.0%} of the plateau's "
            f"{level:.4g}, where it has been since step {plateau.start} "
            f"({held / watched:.0%} of the steps watched): a stall. What ended the captcha "
            "stall in ctcbench's study (docs/convergence.md): BatchNorm, a larger batch, "
            "mixed-length training data",
            {"plateau_start": plateau.start, "plateau_end": plateau.end,
             "plateau_loss": level, "loss": recent, "frames_emitting": emitting}, batch)

    def _event(self, kind: str, message: str, evidence: dict, batch) -> list[Event]:
        if kind in self._reported:
            return []
        self._reported.add(kind)
        path = self._save(kind, batch)
        event = Event(self._step, kind, message, evidence, str(path))
        self.events.append(event)
        if self.report is not None:
            self.report(event.line())
        return [event]

    def _save(self, kind: str, batch) -> Path:
        named = dict(zip((self.kind, "targets", "input_lengths", "target_lengths"),
                         batch.arrays())) | batch.extra()
        self.out_dir.mkdir(parents=True, exist_ok=True)
        stem = self.out_dir / f"step{self._step}-{kind.replace(':', '-')}"
        if str(getattr(named[self.kind], "dtype", "")) == "torch.bfloat16":  # NumPy lacks it
            import torch
            path = stem.with_suffix(".pt")
            torch.save({k: v.detach().cpu() if isinstance(v, torch.Tensor) else torch.as_tensor(v)
                        for k, v in named.items()} | {"blank": self.blank}, path)
            return path
        path = stem.with_suffix(".npz")
        np.savez(path, **{k: to_numpy(v, k)[0] for k, v in named.items()},
                 blank=np.int64(self.blank))
        return path


@dataclass
class _Plateau:
    """The blank plateau as the doctor's looks saw it: the step of the first look that found
    it, the recent loss at each such look, the first look after that did not."""

    start: int | None = None
    end: int | None = None
    levels: list = field(default_factory=list)

    def on(self, step: int, loss: float) -> None:
        self.start = step if self.start is None else self.start
        self.end = None  # found again: the plateau goes on
        self.levels.append(loss)

    def left(self, step: int) -> None:
        self.end = step if self.end is None else self.end


def _grad_norm(model) -> float | None:
    """The L2 norm of every parameter's gradient, or None before any backward."""
    squares = [float((p.grad.detach().double() ** 2).sum()) for p in model.parameters()
               if p.grad is not None]
    return float(np.sqrt(sum(squares))) if squares else None


def _time_major(x):
    """``(N, T, C)`` -> ``(T, N, C)``, a torch tensor kept one (its dtype may be bfloat16)."""
    if hasattr(x, "detach") and hasattr(x, "transpose"):
        return x.transpose(0, 1)
    x = np.asarray(x)
    return x.transpose(1, 0, 2) if x.ndim == 3 else x


class _Batch:
    """One step's batch: the values, targets and lengths, each given or the function that makes
    it (called once, when first needed); the values time-major once read."""

    def __init__(self, values, rest: tuple, layout: str, extra: dict | None = None):
        self._parts, self._layout, self._read = (values, *rest), layout, False
        self._extra = dict(extra or {})

    def extra(self) -> dict:
        """The extra named arrays, each made once."""
        self._extra = {k: v() if callable(v) else v for k, v in self._extra.items()}
        return self._extra

    def arrays(self) -> tuple:
        if not self._read:
            values, *rest = (p() if callable(p) else p for p in self._parts)
            self._parts = (_time_major(values) if self._layout == "NTC" else values, *rest)
            self._read = True
        return self._parts
