"""ctcbench.Monitor in a user's torch loop: each kind of trouble reported once, at the step it
first shows, with a batch file that `ctcbench doctor` diagnoses the same way; none on a healthy
run."""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch
import torch.nn.functional as F

import ctcbench
from ctcbench.doctor.load import load_inputs

T, N, C = 20, 4, 6
TARGETS = torch.tensor([[1, 2, 3], [2, 3, 4], [3, 4, 5], [5, 1, 2]])
IL, TL = torch.full((N,), T), torch.full((N,), 3)


def _train(monitor, logits, steps, lr):
    """An explicit loop over one fixed batch whose 'model' is the logits tensor itself."""
    logits = logits.clone().requires_grad_()
    opt = torch.optim.Adam([logits], lr=lr)
    for _ in range(steps):
        log_probs = logits.log_softmax(-1)  # (T, N, C)
        loss = F.ctc_loss(log_probs, TARGETS, IL, TL)
        opt.zero_grad()
        loss.backward()
        monitor.step(loss, log_probs, TARGETS, IL, TL, grad_norm=logits.grad.norm())
        opt.step()
    return monitor


def _monitor(tmp_path, **kw):
    lines = []
    return ctcbench.Monitor(tmp_path, window=30, check_every=10, report=lines.append, **kw), lines


def test_healthy_run_is_never_reported(tmp_path):
    """Adam fitting the batch from random logits: 150 steps, no report, no file."""
    monitor, lines = _monitor(tmp_path)
    _train(monitor, torch.randn(T, N, C, generator=torch.Generator().manual_seed(0)), 150, 0.1)
    assert monitor.events == [] and lines == [] and not list(tmp_path.iterdir())


def test_stalled_run_on_blank_frames_reports_the_plateau_once(tmp_path):
    """Frames fixed on blank (learning rate 0): the loss is flat from step 0, so the plateau is
    reported at step 30, the doctor's first look (every 10 steps) after the 30-step window
    fills, and never again; its batch file shows the blank plateau to `ctcbench doctor`."""
    monitor, lines = _monitor(tmp_path)
    logits = torch.zeros(T, N, C)
    logits[..., 0] = 4.0
    _train(monitor, logits, 80, 0.0)
    assert [(e.step, e.kind) for e in monitor.events] == [(30, "blank-plateau")]
    assert len(lines) == 1 and lines[0].startswith("ctcbench monitor: step 30: blank-plateau")
    report = ctcbench.diagnose(**load_inputs(monitor.events[0].batch_file))
    assert "blank-collapse" in report.codes


def test_nan_loss_is_reported_once_at_its_first_step(tmp_path):
    """A NaN loss at steps 3 and 5: one report, at step 3."""
    monitor, _ = _monitor(tmp_path)
    lp = torch.randn(T, N, C).log_softmax(-1)
    for step in range(8):
        monitor.step(torch.tensor(math.nan if step in (3, 5) else 5.0 - 0.1 * step), lp,
                     TARGETS, IL, TL)
    assert [(e.step, e.kind) for e in monitor.events] == [(3, "loss-non-finite")]


def test_raw_scores_give_a_negative_loss_and_the_doctor_names_them(tmp_path):
    """Logits passed as log-probs: the loss goes negative and the doctor's input error is
    reported; both once, at step 0, and the saved batch reproduces not-normalized."""
    monitor, _ = _monitor(tmp_path)
    raw = torch.randn(T, N, C, generator=torch.Generator().manual_seed(1)) + 3.0
    for _ in range(5):
        loss = F.ctc_loss(raw, TARGETS, IL, TL)
        assert loss < 0  # exp(raw) sums to about 6 e^3 per frame
        monitor.step(loss, raw, TARGETS, IL, TL)
    kinds = {(e.step, e.kind) for e in monitor.events}
    assert kinds == {(0, "loss-negative"), (0, "input:not-normalized")}
    file = next(e.batch_file for e in monitor.events if e.kind == "input:not-normalized")
    assert ctcbench.diagnose(**load_inputs(file)).codes[0] == "not-normalized"


def test_exploding_gradient_is_reported_against_the_running_median(tmp_path):
    """Norms about 1 for 15 steps, then 100 and 300: one report, at step 15, with the ratio."""
    monitor, _ = _monitor(tmp_path)
    lp = torch.randn(T, N, C).log_softmax(-1)
    norms = [1.0 + 0.01 * k for k in range(15)] + [100.0, 300.0, 1.0]
    for k, norm in enumerate(norms):
        monitor.step(torch.tensor(5.0 - 0.01 * k), lp, TARGETS, IL, TL, grad_norm=norm)
    assert [(e.step, e.kind) for e in monitor.events] == [(15, "gradient-exploding")]
    assert monitor.events[0].evidence["median"] == pytest.approx(np.median(norms[:15]))


def test_bfloat16_batch_is_saved_as_pt_and_reproduces_half_precision(tmp_path):
    """A bfloat16 batch (NumPy has no bfloat16) is saved as .pt; the doctor names it."""
    monitor, _ = _monitor(tmp_path)
    lp = torch.randn(T, N, C).log_softmax(-1).to(torch.bfloat16)
    monitor.step(torch.tensor(5.0), lp, TARGETS, IL, TL)
    (event,) = monitor.events
    assert event.kind == "input:half-precision" and event.batch_file.endswith(".pt")
    assert "half-precision" in ctcbench.diagnose(**load_inputs(event.batch_file)).codes


def test_time_invariant_frames_are_reported_when_two_looks_in_a_row_find_them(tmp_path):
    """One frame per sample repeated at every step (the repeated feature vector): not at the
    first look (an untrained model may show it for a moment), at the second, step 10."""
    monitor, _ = _monitor(tmp_path)
    logits = torch.randn(1, N, C, generator=torch.Generator().manual_seed(2)) * 3
    lp = logits.expand(T, N, C).log_softmax(-1)
    for step in range(25):
        monitor.step(torch.tensor(9.0 - 0.1 * step), lp, TARGETS, IL, TL)
    assert [(e.step, e.kind) for e in monitor.events] == [(10, "input:time-invariant")]


def _blank_frames():
    logits = torch.zeros(T, N, C)
    logits[..., 0] = 4.0  # every frame predicts blank: the doctor's blank-collapse
    return logits.log_softmax(-1)


def _emitting_frames(seed):
    """Frames that vary along time and mostly predict labels: neither collapsed nor repeated."""
    return (torch.randn(T, N, C, generator=torch.Generator().manual_seed(seed)) * 2).log_softmax(-1)


def _feed(monitor, phases):
    """``phases``: (steps, loss at each step, frames) in order; the loss given, not computed."""
    step = 0
    for steps, loss, frames in phases:
        for _ in range(steps):
            monitor.step(torch.tensor(loss(step)), frames(step), TARGETS, IL, TL, step=step)
            step += 1


def test_a_stall_that_outlasts_the_blank_plateau_is_reported(tmp_path):
    """The captcha stall's shape: blank frames at loss 10 for 100 steps, then frames that emit
    labels while the loss creeps to 9.5, within 10% of the plateau. The blank plateau ends at
    the look at step 100; 50 steps on (stall_after), at step 150, the loss is still near 10 and
    the plateau level has held all 150 steps: one loss-stall, its evidence the two steps."""
    monitor, _ = _monitor(tmp_path, stall_after=50)
    _feed(monitor, [(100, lambda s: 10.0, lambda s: _blank_frames()),
                    (200, lambda s: 10.0 - 0.0025 * (s - 100), _emitting_frames)])
    stall = [e for e in monitor.events if e.kind == "loss-stall"]
    assert [e.step for e in stall] == [150]
    assert (stall[0].evidence["plateau_start"], stall[0].evidence["plateau_end"]) == (0, 100)
    assert stall[0].evidence["plateau_loss"] == pytest.approx(10.0)
    assert stall[0].evidence["frames_emitting"] > 0.5
    assert [step for step, _ in monitor.looks[:3]] == [0, 10, 20]  # every check_every steps
    assert "blank-collapse" in monitor.looks[0][1]
    assert "blank-collapse" not in monitor.looks[10][1]  # step 100: labels
    assert "blank-collapse" in ctcbench.diagnose(**load_inputs(
        next(e for e in monitor.events if e.kind == "blank-plateau").batch_file)).codes


def test_a_plateau_that_ends_in_a_falling_loss_is_not_a_stall(tmp_path):
    """A healthy run's start: the same blank plateau, but once labels appear the loss falls
    from 10 to 8 (its 20-step average leaves the 10% band by step 110): no loss-stall."""
    monitor, _ = _monitor(tmp_path, stall_after=50)
    _feed(monitor, [(100, lambda s: 10.0, lambda s: _blank_frames()),
                    (200, lambda s: 8.0 - 0.01 * (s - 100), _emitting_frames)])
    assert "loss-stall" not in {e.kind for e in monitor.events}


def test_a_short_plateau_late_in_a_long_run_is_not_a_stall(tmp_path):
    """Long relative to the run: 400 steps of learning (loss 5), a 40-step blank plateau,
    then labels at the same loss for 160 steps: the plateau's level has held 200 of the
    run's 600 steps, less than half, so no loss-stall."""
    monitor, _ = _monitor(tmp_path, stall_after=50)
    _feed(monitor, [(400, lambda s: 5.0, _emitting_frames),
                    (40, lambda s: 5.0, lambda s: _blank_frames()),
                    (160, lambda s: 5.0, _emitting_frames)])
    assert "loss-stall" not in {e.kind for e in monitor.events}
