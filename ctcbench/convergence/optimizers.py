"""The optimizers a training run can use, by name, and its learning-rate schedule.

Each entry builds a ``torch.optim`` optimizer from a ``TrainConfig``: ``lr`` and
``weight_decay`` for all, ``beta1``/``beta2`` for Adam and AdamW, ``alpha`` for RMSprop,
``momentum`` for RMSprop and SGD. The schedule warms the rate up linearly over ``warmup``
steps, then keeps it constant.
"""
from __future__ import annotations

import importlib


def optim():
    """``torch.optim``, imported on first use: ``--help`` lists these names without torch."""
    return importlib.import_module("torch.optim")


OPTIMIZERS = {
    "adam": lambda p, c: optim().Adam(p, lr=c.lr, betas=(c.beta1, c.beta2),
                                      weight_decay=c.weight_decay),
    "rmsprop": lambda p, c: optim().RMSprop(p, lr=c.lr, alpha=c.alpha, momentum=c.momentum,
                                            weight_decay=c.weight_decay),
    "sgd": lambda p, c: optim().SGD(p, lr=c.lr, momentum=c.momentum, weight_decay=c.weight_decay),
    "adamw": lambda p, c: optim().AdamW(p, lr=c.lr, betas=(c.beta1, c.beta2),
                                        weight_decay=c.weight_decay),
    "adadelta": lambda p, c: optim().Adadelta(p, lr=c.lr, weight_decay=c.weight_decay),
}


def warmup_factor(warmup: int):
    """The factor on the rate after ``step`` scheduler steps: ``(step + 1) / warmup`` up to 1,
    and 1 throughout when ``warmup`` is 0."""
    return lambda step: min(1.0, (step + 1) / warmup) if warmup > 0 else 1.0


def make_optimizer(params, cfg):
    """``(optimizer, scheduler)`` for ``cfg`` (a ``TrainConfig``) over ``params``."""
    opt = OPTIMIZERS[cfg.optimizer](params, cfg)
    return opt, optim().lr_scheduler.LambdaLR(opt, warmup_factor(cfg.warmup))
