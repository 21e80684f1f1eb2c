"""``ctcbench.transformers.Monitor``: the doctor's monitor (``ctcbench.Monitor``) as a
``transformers.TrainerCallback``, for any ``*ForCTC`` model under ``Trainer``::

    trainer = Trainer(model=model, args=args, train_dataset=ds, data_collator=collator,
                      processing_class=processor)
    ctcbench.transformers.Monitor("monitor/").attach(trainer)  # or callbacks=[Monitor(...)]

It reads the model's conventions from its config (``pad_token_id`` is the blank,
``ctc_loss_reduction``, ``ctc_zero_infinity``), sees each training forward pass through a
forward hook (the batch, the logits, the loss before Trainer's ``logging_nan_inf_filter``
averages a nan away) and the gradient norm before clipping through gradient hooks, and reports
once per kind: ``loss-non-finite``, ``gradient-exploding``, ``blank-plateau`` (the model
predicts only the pad token), ``loss-stall`` and ``input:<code>``, each with the config field,
TrainingArguments field or collator line to change, on stderr and in ``state.log_history``. The
batch is saved beside the model's ``config.json`` for ``ctcbench doctor FILE
--transformers-config config.json``. Steps count optimizer steps from 0 (``global_step - 1``).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
from transformers import TrainerCallback

from ctcbench.doctor.findings import Code
from ctcbench.doctor.load import load_inputs
from ctcbench.doctor.monitor import Monitor as _Monitor
from ctcbench.transformers.checks import CITE_INFINITY, diagnose_ctc
from ctcbench.transformers.conventions import frame_lengths, loss_targets, read_conventions

CITE_NAN_FILTER = "huggingface/transformers#13619"  # Trainer's logging_nan_inf_filter
CITE_PLATEAU = "huggingface/transformers#12137"  # a wav2vec2 fine-tune stuck, WER 1.0


def _stderr(line: str) -> None:
    print(line, file=sys.stderr, flush=True)


class Monitor(TrainerCallback):
    """Watch ``Trainer.train`` of a ``*ForCTC`` model; ``events`` holds the reports.

    Args:
      out_dir: where offending batches (``step<k>-<kind>.npz``) and ``config.json`` go.
      tokenizer: the tokenizer or processor (default: the Trainer's ``processing_class``),
        checked against the config's ``pad_token_id`` and ``vocab_size``.
      tuned_for: the reduction the learning rate was tuned for ("mean", the recipes').
      check_every, window, flat_tol, stall_band, stall_after, grad_factor: as
        ``ctcbench.Monitor``. report: called with each report's line (default: stderr).
    """

    def __init__(self, out_dir="ctcbench-monitor", *, tokenizer=None, tuned_for: str = "mean",
                 check_every: int = 25, window: int = 500, flat_tol: float = 0.02,
                 stall_band: float = 0.1, stall_after: int = 100, grad_factor: float = 10.0,
                 report=_stderr):
        self.out_dir, self.tokenizer, self.tuned_for = Path(out_dir), tokenizer, tuned_for
        self.options = dict(check_every=check_every, window=window, flat_tol=flat_tol,
                            stall_band=stall_band, stall_after=stall_after,
                            grad_factor=grad_factor)
        self.report = report
        self.watch = None
        self.lines: list[str] = []  # each report as printed
        self._hooks, self._seen, self._squares, self._pending = [], [], {}, []

    @property
    def events(self):
        return self.watch.events if self.watch is not None else []

    def attach(self, trainer):
        """Put this monitor first among ``trainer``'s callbacks and return it.

        Trainer calls its ``report_to`` integrations (TensorBoard, W&B, ...) before callbacks
        passed to it, so they log a step before this monitor adds its reports to it; first,
        every integration logs ``ctcbench/<kind>`` (the global step) beside the loss.
        """
        callbacks = trainer.callback_handler.callbacks
        callbacks[:] = [self] + [c for c in callbacks if c is not self]
        return self

    # -- Trainer's events ------------------------------------------------------------------
    def on_train_begin(self, args, state, control, model=None, processing_class=None, **_):
        self.model, self.args = model, args
        self.conv = read_conventions(model)
        self.tokenizer = self.tokenizer if self.tokenizer is not None else processing_class
        self.watch = _Monitor(self.out_dir, blank=self.conv.blank, reduction=self.conv.reduction,
                              kind="logits", layout="NTC", report=None, diagnose=self._look,
                              **self.options)
        self.out_dir.mkdir(parents=True, exist_ok=True)
        self.config_file = self.out_dir / "config.json"
        model.config.to_json_file(self.config_file)
        self._hooks = [model.register_forward_hook(self._forward, with_kwargs=True)]
        self._hooks += [p.register_post_accumulate_grad_hook(self._gradient)
                        for p in model.parameters() if p.requires_grad]

    def on_step_end(self, args, state, control, **_):
        if not self._seen:
            return
        kwargs, logits = self._seen[-1][0], self._seen[-1][2]
        loss = float(np.mean([s[1] for s in self._seen]))  # the micro-batches' mean
        norm = (float(sum(self._squares.values())) ** 0.5) if self._squares else None
        self._seen, self._squares = [], {}
        if not np.isfinite(loss):
            norm = None  # a non-finite loss's gradient is its own event's, not another
        labels = kwargs["labels"].detach().cpu()
        made = {}

        def targets(i):
            if "t" not in made:
                made["t"] = loss_targets(labels, self.conv)
            return made["t"][i]

        step = state.global_step - 1
        new = self.watch.step(
            loss, logits, lambda: targets(0), lambda: frame_lengths(self.model, kwargs),
            lambda: targets(1), grad_norm=norm, step=step,
            extra={"labels": labels.numpy(),
                   "masks_blank_labels": np.int64(self.conv.masks_blank_labels)})
        for event in new:
            self._announce(event, state, control)

    def on_log(self, args, state, control, logs=None, **_):
        for kind, step in self._pending:  # for the callbacks after this one
            if logs is not None:
                logs[f"ctcbench/{kind}"] = float(step)
        self._pending = []

    def on_train_end(self, args, state, control, **_):
        for hook in self._hooks:
            hook.remove()
        self._hooks = []

    # -- hooks -----------------------------------------------------------------------------
    def _forward(self, module, args, kwargs, output):
        loss = getattr(output, "loss", None)
        if module.training and loss is not None and kwargs.get("labels") is not None:
            self._seen.append((kwargs, float(loss.detach()), output.logits.detach()))

    def _gradient(self, p):
        self._squares[id(p)] = float(p.grad.detach().double().pow(2).sum())

    # -- the look and the reports ----------------------------------------------------------
    def _look(self, values, targets, input_lengths, target_lengths, *, labels,
              masks_blank_labels=None):
        self.last_report = diagnose_ctc(values, labels, input_lengths, self.conv,
                                        tokenizer=self.tokenizer,
                                        learning_rate=self.args.learning_rate,
                                        tuned_for=self.tuned_for, layout="TNC")
        return self.last_report

    def _announce(self, event, state, control) -> None:
        fix = self._fix(event)
        line = (f"ctcbench monitor: step {event.step} (global_step {state.global_step}): "
                f"{event.kind}: {event.message.rstrip('.')}. Fix: {fix} (batch saved: ctcbench "
                f"doctor {event.batch_file} --transformers-config {self.config_file})")
        event.fix = fix
        self.lines.append(line)
        state.log_history.append({"ctcbench_monitor": event.kind, "message": line,
                                  "step": state.global_step})
        self._pending.append((event.kind, state.global_step))
        control.should_log = True  # the loss of this step is logged beside the report
        if self.report is not None:
            self.report(line)

    def _fix(self, event) -> str:
        """The config field, TrainingArguments field or collator line for ``event``."""
        args, conv = self.args, self.conv
        if event.kind.startswith("input:"):
            code = event.kind.removeprefix("input:")
            return next((f.fix for f in self.last_report.findings if f.code == code), "")
        if event.kind == "loss-non-finite":
            batch = load_inputs(event.batch_file, extra=("labels",))
            report = self._look(batch["logits"], None, batch["input_lengths"], None,
                                labels=batch["labels"])
            cause = next((f for f in report.errors if f.code == Code.INFEASIBLE_TARGET),
                         report.errors[0] if report.errors else None)
            hidden = (f" Trainer's logged loss hides it (logging_nan_inf_filter=True: "
                      f"{CITE_NAN_FILTER})." if args.logging_nan_inf_filter else "")
            if cause is not None:
                event.message += f"; cause: {cause.code}: {cause.message}"
                return cause.fix + hidden
            return (f"no input error in this batch: a numeric blow-up; lower learning_rate "
                    f"(now {args.learning_rate:g}), keep max_grad_norm (now "
                    f"{args.max_grad_norm:g}) and check fp16/bf16; with infeasible samples "
                    f"elsewhere set config.ctc_zero_infinity=True ({CITE_INFINITY})." + hidden)
        if event.kind == "gradient-exploding":
            return (f"lower TrainingArguments.learning_rate (now {args.learning_rate:g}) or add "
                    f"warmup_steps (now {args.warmup_steps}); max_grad_norm (now "
                    f"{args.max_grad_norm:g}) clips what reaches the optimizer, not this norm.")
        if event.kind in ("blank-plateau", "loss-stall"):
            return (f"the model predicts only the pad token (config.pad_token_id = "
                    f"{conv.blank}, CTC's blank) ({CITE_PLATEAU}); at learning_rate = "
                    f"{args.learning_rate:g} lower it (the recipes fine-tune at 1e-4 to 3e-4) "
                    f"and add warmup_steps (now {args.warmup_steps}); at such a rate already, "
                    "train longer and check the labels with ctcbench.diagnose_batch.")
        return "see ctcbench doctor on the saved batch."
