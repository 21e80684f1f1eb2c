"""The one form of a library error: ``NAME: expected WHAT, got WHAT_IT_WAS``.

``NAME`` is what the user wrote (an argument, a field, a file); the command line prints the
message as it is, on one line, and may rename ``NAME`` to the option it came from.
"""
from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import NoReturn


class InputError(ValueError):
    """A value is wrong: ``name`` is what holds it, ``problem`` the rest of the message."""

    def __init__(self, name: str, problem: str):
        super().__init__(f"{name}: {problem}")
        self.name, self.problem = name, problem

    def __reduce__(self):  # raised in a worker process, it is pickled back to the parent
        return type(self), (self.name, self.problem)

    def named(self, name: str) -> str:
        """The message with ``name`` (an option, ``FILE: key``) in place of ``self.name``."""
        return f"{name}: {self.problem}"


def fail(name: str, expected: str, got, error: type[InputError] = InputError) -> NoReturn:
    """Raise ``error(name, "expected {expected}, got {got}")``."""
    raise error(name, f"expected {expected}, got {got}")


def expect(ok: bool, name: str, expected: str, got, error: type[InputError] = InputError) -> None:
    """:func:`fail` unless ``ok``."""
    if not ok:
        fail(name, expected, got, error)


class UnknownName(InputError, KeyError):
    """A name (a backend, a case) that is not among the known ones; a KeyError too, for the
    callers that look names up."""

    __str__ = InputError.__str__  # KeyError's own would quote the message


def one_of(name: str, values: str | Iterable[str], known: Iterable[str], *,
           listed: Iterable[str] | None = None, error: type[InputError] = UnknownName) -> None:
    """Raise ``error`` unless every one of ``values`` is in ``known``: ``NAME: expected one of
    a, b, c, got 'x' (did you mean 'y'?)``. ``listed``, when given, is what the message offers
    instead of every known name (the families of a large library)."""
    values = [values] if isinstance(values, str) else list(values)
    known = list(known)
    bad = [v for v in values if v not in known]
    if not bad:
        return
    hints = [m for v in bad for m in difflib.get_close_matches(v, known, n=1, cutoff=0.6)]
    offered = ", ".join(sorted(listed if listed is not None else known))
    got = ", ".join(repr(v) for v in bad)
    near = f" (did you mean {', '.join(repr(h) for h in hints)}?)" if hints else ""
    raise error(name, f"expected one of {offered}, got {got}{near}")
