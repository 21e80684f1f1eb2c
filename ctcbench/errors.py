"""The one form of a library error: ``NAME: expected WHAT, got WHAT_IT_WAS``.

``NAME`` is what the user wrote (an argument, a field, a file); the command line prints the
message as it is, on one line, and may rename ``NAME`` to the option it came from.
"""
from __future__ import annotations

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
