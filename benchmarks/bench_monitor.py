"""Overhead of ctcbench.Monitor in a torch CTC loop (docs/doctor.md, "During training").

Not part of the test suite (timing depends on the machine). Run with:

    python -m pytest benchmarks/bench_monitor.py -p no:cacheprovider

T=400, N=32, C=100, L=60: one step is log_softmax, ctc_loss forward and backward; the monitored
step adds Monitor.step with its defaults (the doctor every 25 steps).
"""
import pytest
import torch
import torch.nn.functional as F

import ctcbench

T, N, C, L = 400, 32, 100, 60


@pytest.fixture
def batch():
    torch.manual_seed(0)
    return (torch.randn(T, N, C, requires_grad=True), torch.randint(1, C, (N, L)),
            torch.full((N,), T), torch.randint(L // 2, L + 1, (N,)))


@pytest.mark.parametrize("monitored", [False, True])
@pytest.mark.benchmark(group="monitor")
def test_step(benchmark, batch, tmp_path, monitored):
    """One training step, with and without the monitor (mean over 100 steps or more)."""
    logits, targets, il, tl = batch
    monitor = ctcbench.Monitor(tmp_path, report=None) if monitored else None

    def step():
        log_probs = logits.log_softmax(-1)  # (T, N, C)
        loss = F.ctc_loss(log_probs, targets, il, tl)
        logits.grad = None
        loss.backward()
        if monitor is not None:
            monitor.step(loss, log_probs, targets, il, tl, grad_norm=logits.grad.norm())
    benchmark.pedantic(step, rounds=100, iterations=1)
    assert monitor is None or monitor.events == []
