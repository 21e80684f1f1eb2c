"""``ctcbench.transformers``: the doctor for Hugging Face Transformers' ``*ForCTC`` models.

``Monitor`` (a ``transformers.TrainerCallback``), ``diagnose_batch(model, batch)`` and the
conventions read from a model's config. Needs the optional extra: ``pip install
'ctcbench[transformers]'``; ``import ctcbench`` never imports it.
"""
from __future__ import annotations

import importlib

INSTALL = "pip install 'ctcbench[transformers]'"
_NAMES = {"Monitor": "ctcbench.transformers.monitor",
          "diagnose_batch": "ctcbench.transformers.batch",
          "check_tokenizer": "ctcbench.transformers.tokenizer",
          "Conventions": "ctcbench.transformers.conventions",
          "read_conventions": "ctcbench.transformers.conventions"}

try:
    import transformers as _transformers  # noqa: F401  (checked once, here)
except ImportError as missing:
    raise ImportError(f"ctcbench.transformers: expected Hugging Face Transformers installed "
                      f"({INSTALL}), got {missing}") from None

__all__ = sorted(_NAMES)


def __getattr__(name: str):
    if name in _NAMES:
        return getattr(importlib.import_module(_NAMES[name]), name)
    raise AttributeError(f"module 'ctcbench.transformers' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))
