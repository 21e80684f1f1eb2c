"""The optimizer table and the warm-up schedule."""
import pytest
import torch

from ctcbench.convergence.optimizers import OPTIMIZERS, make_optimizer, warmup_factor
from ctcbench.convergence.train import train_run
from ctcbench.runs.store import RowLog
from conftest import tiny_train_config


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def test_the_table_names_five_optimizers():
    """The names the --optimizer option documents."""
    assert list(OPTIMIZERS) == ["adam", "rmsprop", "sgd", "adamw", "adadelta"]


@pytest.mark.parametrize("opt", ["adam", "rmsprop", "sgd", "adamw", "adadelta"])
def test_every_optimizer_trains(tmp_path, opt):
    """Every optimizer name builds and steps (update norm > 0)."""
    train_run(tiny_train_config(steps=2, eval_every=2, optimizer=opt, lr=0.1), tmp_path)
    assert RowLog(tmp_path / "curve.jsonl").rows()[-1]["update_norm"] > 0


@pytest.mark.parametrize("name, hyper", [
    ("adam", {"lr": 0.01, "betas": (0.5, 0.9), "weight_decay": 0.1}),
    ("adamw", {"lr": 0.01, "betas": (0.5, 0.9), "weight_decay": 0.1}),
    ("rmsprop", {"lr": 0.01, "alpha": 0.8, "momentum": 0.3, "weight_decay": 0.1}),
    ("sgd", {"lr": 0.01, "momentum": 0.3, "weight_decay": 0.1}),
    ("adadelta", {"lr": 0.01, "weight_decay": 0.1}),
])
def test_each_optimizer_gets_the_settings_meant_for_it(name, hyper):
    """beta1/beta2 reach Adam(W), alpha RMSprop, momentum RMSprop and SGD, weight decay all."""
    cfg = tiny_train_config(optimizer=name, lr=0.01, beta1=0.5, beta2=0.9, alpha=0.8,
                            momentum=0.3, weight_decay=0.1)
    opt, _ = make_optimizer([torch.nn.Parameter(torch.zeros(2))], cfg)
    group = opt.param_groups[0]
    assert {k: group[k] for k in hyper} == hyper


def test_warmup_is_linear_then_constant():
    """warmup=4: the rate is 1/4, 2/4, 3/4 of lr for the first three steps, then lr; no
    warm-up is lr throughout."""
    assert [warmup_factor(4)(step) for step in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert [warmup_factor(0)(step) for step in range(3)] == [1.0, 1.0, 1.0]
    opt, sched = make_optimizer([torch.nn.Parameter(torch.zeros(2))],
                                tiny_train_config(optimizer="sgd", lr=0.2, warmup=2))
    seen = [opt.param_groups[0]["lr"]]
    for _ in range(2):
        opt.step()
        sched.step()
        seen.append(opt.param_groups[0]["lr"])
    assert seen == pytest.approx([0.1, 0.2, 0.2])
