"""The option types of the command line whose errors read like the library's
(``--budget: expected a number > 0, got 'abc'``; ``ctcbench.cli.Commands`` prints them so),
click's own refusals of a path said the same way (``path_message``).
A base part: the drivers' own options (``convergence.options``) use them too."""
from __future__ import annotations

import difflib
import re

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


class Path(click.Path):
    """``click.Path`` that refuses an empty value, which the OS would take for the current
    folder (``--out ""`` writing a run into it); its other refusals are said in our words by
    the command group (:func:`path_message`)."""

    def convert(self, value, param, ctx):
        if isinstance(value, str) and not value.strip():
            self.fail(f"expected a {'folder' if not self.file_okay else 'file'} path, got "
                      f"{value!r}", param, ctx)
        return super().convert(value, param, ctx)


CLICK_PATH = re.compile(r"\w+ (?P<path>'.*'|\".*\") (?P<what>does not exist|is a file|"
                        r"is a directory|is not \w+)\.$", re.S)


def path_message(path_type: click.Path, message: str) -> str:
    """``click.Path``'s refusal (``File 'x' is a directory.``, click's words) in the error
    form: ``expected a file, got 'x' (a folder)``; any other message as it is."""
    m = CLICK_PATH.match(message)
    if m is None:
        return message
    kind = ("file" if not path_type.dir_okay else "folder" if not path_type.file_okay
            else "file or folder")
    what = m["what"].removeprefix("is ")
    if what.startswith("not "):  # not readable, not writable
        return f"expected a {what[4:]} {kind}, got {m['path']}"
    got = {"does not exist": "no such path", "a directory": "a folder"}.get(what, what)
    return f"expected {'an existing' if path_type.exists else 'a'} {kind}, got {m['path']} ({got})"
