"""One registry design for every kind of implementation: a name -> factory table, built-ins
and third parties through one path, nothing imported until a name is asked for.

An entry (a *target*) is a ``"module:attr"`` string, an entry point, a class or a zero-argument
function (see :mod:`ctcbench.runtime.factory`). A table is filled, in this order of precedence,
from ``register`` calls, the built-ins, and the entry points of its group (the entry point's
name is the implementation's name). Each kind of implementation has one :class:`Registry`:
the losses' in :mod:`ctcbench.runtime.registry` (group ``ctcbench.backends``), the decoders'
and aligners' in :mod:`ctcbench.runtime.decoders` (group ``ctcbench.decoders``).
"""
from __future__ import annotations

from collections.abc import Mapping
from importlib.metadata import entry_points
from types import MappingProxyType

from ctcbench.errors import InputError, one_of
from ctcbench.runtime.factory import factory_spec, is_entry_point, load_factory
from ctcbench.runtime.protocol import BackendUnavailable


class Registry:
    """The implementations of one kind by name.

    ``kind``: the word the messages use ("backend", "decoder"); ``builtins``: name ->
    ``"module:attr"``; ``group``: the entry-point group third parties declare theirs in;
    ``traits``: the kind's traits dataclass, whose ``of(impl)`` reads what an implementation
    declares (at least ``isolated``, ``timeout_s`` and ``startup_timeout_s``).
    """

    def __init__(self, kind: str, builtins: Mapping[str, str], group: str, traits):
        self.kind, self.builtins, self.group, self.traits = kind, builtins, group, traits
        self._added: dict[str, object] = {}  # name -> target, set by register()
        self._hidden: set[str] = set()  # built-in or entry-point names unregister() took away
        self.revision = 0  # goes up at each register() and unregister(): a key for caches

    def _base(self) -> dict[str, object]:
        """Built-ins, then entry points (a built-in name wins)."""
        table: dict[str, object] = dict(self.builtins)
        for ep in entry_points(group=self.group):
            table.setdefault(ep.name, ep)
        return table

    def view(self) -> Mapping[str, object]:
        """name -> target of every implementation known now, read-only."""
        table = {name: target for name, target in self._base().items()
                 if name not in self._hidden}
        table.update(self._added)
        return MappingProxyType(table)

    def names(self) -> list[str]:
        return sorted(self.view())

    def check(self, names, option: str | None = None) -> None:
        """An UnknownName (a KeyError) naming ``option`` (default the kind) unless every one
        of ``names`` is known, with a "did you mean" for a near miss."""
        one_of(option or self.kind, names, self.view())

    def target(self, name: str) -> object:
        """The table entry of ``name``; an UnknownName listing the known ones."""
        table = self.view()
        one_of(self.kind, name, table)
        return table[name]

    def source(self, name: str) -> str:
        """``builtin``, or ``plugin`` for an entry point or a run-time registration."""
        return "builtin" if name in self.builtins and name not in self._added else "plugin"

    def register(self, name: str, factory, *, replace: bool = False) -> None:
        """Add ``factory`` (a class, a zero-argument function, or a ``"module:attr"`` path) as
        ``name``; a name already known is a ValueError unless ``replace``. A built-in's own
        path under its name is the built-in again (after :meth:`unregister`, say)."""
        if not isinstance(name, str) or not name:
            raise ValueError(f"name: expected a non-empty string, got {name!r}")
        if not (callable(factory) or (isinstance(factory, str) and ":" in factory)):
            raise ValueError(f"factory: expected a class, a zero-argument function or a "
                             f"'module:attr' string, got {factory!r}")
        if not replace and name in self.view():
            raise ValueError(f"name: {self.kind} {name!r} is already registered "
                             f"(pass replace=True to replace it)")
        self._hidden.discard(name)
        if factory == self.builtins.get(name):
            self._added.pop(name, None)
        else:
            self._added[name] = factory
        self.revision += 1

    def unregister(self, name: str) -> None:
        """Remove ``name``: one added by :meth:`register` is forgotten, a built-in or
        entry-point one hidden until something is registered under its name again. An unknown
        name is a KeyError naming it and the known ones."""
        self.target(name)
        self._added.pop(name, None)
        if name in self._base():
            self._hidden.add(name)
        self.revision += 1

    def load(self, name: str):
        """The class or factory ``name`` stands for, imported now; BackendUnavailable when it
        does not import (with a hint for an entry point's distribution)."""
        return self._import(name, self.target(name))

    def _import(self, name: str, target):
        try:
            return load_factory(target)
        except ImportError as exc:
            raise BackendUnavailable(f"cannot import {self.kind} {name!r}: {exc}",
                                     _reinstall_hint(target)) from None

    def build(self, name: str, *, isolated: bool | None = None) -> tuple:
        """``(impl, traits, worker)`` of ``name``: the object its factory makes here, its
        traits, and the :class:`~ctcbench.runtime.worker.IsolatedBackend` that runs it in a
        worker process, or None. ``isolated``: None follows the ``isolated`` trait; True or
        False overrides it. BackendUnavailable when it cannot run here; an InputError
        "KIND 'NAME': CLASS.ATTR: expected ..." when it declares a trait wrongly."""
        target = self.target(name)
        factory = self._import(name, target)
        impl = factory()
        try:
            traits = self.traits.of(impl)
        except InputError as exc:  # named as the user asked for it, then as its code says
            raise InputError(f"{self.kind} {name!r}: {exc.name}", exc.problem) from None
        worker = None
        if traits.isolated if isolated is None else isolated:
            from ctcbench.runtime.worker import IsolatedBackend
            worker = IsolatedBackend(name, factory_spec(target, factory), traits)
        return impl, traits, worker

    def spec(self, name: str) -> str:
        """``"module:attr"`` from which another process can build ``name`` as it is
        registered here; a ValueError when it has none."""
        target = self.target(name)
        return factory_spec(target, load_factory(target))


def _reinstall_hint(target) -> str | None:
    dist = getattr(target, "dist", None) if is_entry_point(target) else None
    return f"pip install --force-reinstall {dist.name}" if dist is not None else None
