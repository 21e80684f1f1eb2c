"""The option types of the command line whose errors read like the library's
(``--budget: expected a number > 0, got 'abc'``; ``ctcbench.cli.Commands`` prints them so).
A base part: the drivers' own options (``convergence.options``) use them too."""
from __future__ import annotations

import difflib

import click


class Number(click.ParamType):
    """A number option said in plain words: ``Number(int, min=1)`` is "a whole number >= 1",
    ``Number(float, min=0, open=True)`` "a number > 0"."""

    def __init__(self, kind: type = float, *, min: float | None = None, open: bool = False):
        self.kind, self.min, self.open = kind, min, open
        self.name = "whole number" if kind is int else "number"

    def get_metavar(self, *args, **kwargs) -> str:  # in --help: INT or FLOAT, as click's
        return "INT" if self.kind is int else "FLOAT"

    def describe(self) -> str:
        bound = "" if self.min is None else f" {'>' if self.open else '>='} {self.min:g}"
        return f"a {self.name}{bound}"

    def convert(self, value, param, ctx):
        try:
            number = self.kind(value)
        except (TypeError, ValueError):
            number = None
        if number is None or (self.min is not None and (
                number < self.min or (self.open and number == self.min))):
            self.fail(f"expected {self.describe()}, got {value!r}", param, ctx)
        return number


class OneOf(click.Choice):
    """``click.Choice`` whose error reads like ``ctcbench.errors.one_of``'s, with a "did you
    mean"."""

    def convert(self, value, param, ctx):
        if value in self.choices:
            return value
        near = difflib.get_close_matches(str(value), list(self.choices), n=1, cutoff=0.6)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        self.fail(f"expected one of {', '.join(self.choices)}, got {value!r}{hint}", param, ctx)
