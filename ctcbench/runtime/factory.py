"""How an implementation's factory is named and found: the one piece the registries (in this
process, ``ctcbench.runtime.table``) and a worker process (rebuilding it there) share.

A table entry is a ``"module:attr"`` string, an entry point, or the class or zero-argument
function itself, or a ``functools.partial`` of one with JSON keyword arguments (a user's CTC
function: ``ctcbench/runtime/function_backend.py``); a worker process gets the ``"module:attr"`` form only,
followed by ``" {json keyword arguments}"`` for a partial.
"""
from __future__ import annotations

import functools
import importlib
import json


def is_entry_point(target) -> bool:
    return hasattr(target, "load") and hasattr(target, "group")


def load_factory(target):
    """The class or factory a table entry (``"module:attr"``, entry point, callable) names."""
    if isinstance(target, str):
        path, _, kwargs = target.partition(" ")
        module, _, attr = path.partition(":")
        factory = getattr(importlib.import_module(module), attr)
        return functools.partial(factory, **json.loads(kwargs)) if kwargs else factory
    if is_entry_point(target):
        return target.load()
    return target


def factory_spec(target, factory) -> str:
    """``"module:attr"`` a worker process can import to rebuild the backend ``target`` names
    (``factory``: what :func:`load_factory` made of it); a ValueError when there is none."""
    if isinstance(target, str):
        return target
    if is_entry_point(target):
        return target.value
    if isinstance(factory, functools.partial) and not factory.args:
        return f"{factory_spec(factory.func, factory.func)} {json.dumps(factory.keywords)}"
    module, qualname = getattr(factory, "__module__", None), getattr(factory, "__qualname__", "")
    if module is None or "<" in qualname or module == "__main__":
        raise ValueError(f"backend factory {factory!r}: expected an importable module-level class "
                         f"or function (or a 'module:attr' string) to run it isolated")
    return f"{module}:{qualname}"
