"""What the self-fuzz of the command line, of run folders and of user functions shares: the
commands and their options read off the click tree (no list of options), bad values drawn
from each option's own declaration, a bounded call of the CLI, and the oracle every answer
is held to (docs/bad-input.md, "Self-fuzz")."""
from __future__ import annotations

import contextlib
import os
import re
import signal
import time
from dataclasses import dataclass

import click
from click.testing import CliRunner
from hypothesis import settings
from hypothesis import strategies as st

from ctcbench.cli import cli
from ctcbench.cli_types import Number

LONG = bool(os.environ.get("CTCBENCH_SELFFUZZ_EXAMPLES"))  # the longer run (conftest.py)


def fuzz_settings(quick: int) -> settings:
    """The suite's profile (conftest.py); in the quick run only ``quick`` examples, since
    each of these is a command run, not a function call."""
    profile = settings.get_profile("ctcbench-selffuzz")
    return settings(profile) if LONG else settings(profile, max_examples=quick)


# -- the command tree ----------------------------------------------------------------------
def commands(group: click.Group = cli, prefix: tuple[str, ...] = ()) -> dict:
    """``{("compare",): command, ...}``: every leaf command of the tree, its generated setting
    options included (``SettingsCommand`` makes them on first use)."""
    out = {}
    for name, cmd in group.commands.items():
        if isinstance(cmd, click.Group):
            out.update(commands(cmd, (*prefix, name)))
            continue
        cmd.get_params(click.Context(cmd, info_name=name))
        out[(*prefix, name)] = cmd
    return out


def options(cmd: click.Command) -> list[click.Option]:
    """The options a user gives a value or a flag (not --help)."""
    return [p for p in cmd.params if isinstance(p, click.Option) and "--help" not in p.opts]


def setting_of(cmd: click.Command, option: click.Option):
    """The ``Setting`` an option of a ``SettingsCommand`` was made from, or None."""
    table = getattr(cmd, "settings", None)
    if table is None:
        return None
    return next((s for s in table() if s.option == option.opts[0]), None)


def choices_of(cmd, option) -> list[str]:
    """The values an option's declaration allows by name (a choice type or a setting's
    table); empty when it takes free text."""
    if isinstance(option.type, click.Choice):
        return list(option.type.choices)
    s = setting_of(cmd, option)
    if s is not None and s.choices is not None:
        return [str(c) for c in s.choices()]
    return []


def is_path(option) -> bool:
    return isinstance(option.type, click.Path)


def takes_list(option) -> bool:
    return option.multiple


# -- bad values, drawn from an option's declaration ----------------------------------------
TEXT = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
               max_size=12)


def misspelt(word: str) -> st.SearchStrategy[str]:
    """``word`` with one character dropped, doubled or upper-cased, or a suffix added."""
    return st.sampled_from([word[1:], word[:-1] + word[-1] * 2, word.upper() + "x",
                            word + "_", "x" + word, word.replace("o", "0")]).filter(
        lambda w: w != word)


def bad_number(kind: type, low) -> st.SearchStrategy[str]:
    """Text that is no number of ``kind``, or one below the declared minimum, NaN or
    infinite."""
    words = ["abc", "", " ", "1,2", "0x10", "nan", "inf", "-inf", "1e400", "--", "½", "1_0_"]
    if kind is int:
        words += ["1.5", "2e3", "True"]
    below = [] if low is None else [str(int(low) - 1 if kind is int else low - 0.5), "-1e9"]
    return st.one_of(st.sampled_from(words + below), TEXT.filter(lambda t: not _number(t)))


def _number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def bad_path(option, tmp) -> st.SearchStrategy[str]:
    """Paths its declaration refuses or cannot use: a folder where a file belongs, a file where a
    folder belongs, a missing one, one under a file (not creatable), an empty one."""
    folder, file = tmp / "a-folder", tmp / "a-file.txt"
    folder.mkdir(exist_ok=True)
    file.write_text("not what any command reads\n")
    return st.sampled_from([str(folder), str(file), str(tmp / "missing" / "x.json"),
                            str(file / "under-a-file"), "", str(tmp / "é ü.json")])


def bad_value(cmd, option, tmp) -> st.SearchStrategy[str]:
    """A value the option's own declaration says is wrong (or, for free text, any text)."""
    choices = choices_of(cmd, option)
    if isinstance(option.type, Number):
        return bad_number(option.type.kind, option.type.min)
    if is_path(option):
        return bad_path(option, tmp)
    if choices:
        near = st.sampled_from(choices).flatmap(misspelt)
        twice = st.sampled_from(choices).map(lambda c: f"{c},{c}")
        blanks = st.sampled_from(["", ",", " , ", ",,"])
        return st.one_of(near, blanks, TEXT, *([twice] if takes_list(option) else []))
    if takes_list(option):
        return st.one_of(st.sampled_from(["", ",", " , ", "a,,b", "x,x", "-1"]), TEXT)
    return st.one_of(TEXT, st.sampled_from(["", ":", "a:b", "-1", "x" * 300, "nan"]))


def value_options(cmd) -> list[click.Option]:
    """The options that take a value (flags have no wrong value, only wrong company)."""
    return [o for o in options(cmd) if not o.is_flag and not o.count]


# -- calling the CLI, bounded --------------------------------------------------------------
class Hang(Exception):
    """A call ran past its bound."""


@dataclass
class Outcome:
    args: list[str]
    exit_code: int | None
    output: str
    exception: BaseException | None
    seconds: float


@contextlib.contextmanager
def bounded(seconds: float, error: Exception | None = None):
    """Raise ``error`` (default: ``Hang``) in this (main) thread after ``seconds`` (SIGALRM)."""
    def ring(signum, frame):
        raise error if error is not None else Hang(f"past {seconds:g} s")
    old = signal.signal(signal.SIGALRM, ring)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)


def run_cli(args, bound_s: float = 60.0, cwd=None) -> Outcome:
    """``ctcbench ARGS`` in this process (CliRunner), stopped after ``bound_s``."""
    args = [str(a) for a in args]
    start = time.monotonic()
    with bounded(bound_s), (contextlib.chdir(cwd) if cwd else contextlib.nullcontext()):
        try:
            res = CliRunner().invoke(cli, args, catch_exceptions=True)
        except Hang as exc:  # raised outside the command's own frames
            return Outcome(args, None, "", exc, time.monotonic() - start)
    return Outcome(args, res.exit_code, res.output, res.exception, time.monotonic() - start)


# -- the oracle ----------------------------------------------------------------------------
# what a library says in its own words, never ctcbench's: a message with one of these leaked
LEAKS = re.compile("|".join([
    r"Traceback \(most recent call last\)", r"\[Errno \d+\]", r"zero-size array",
    r"object has no attribute", r"'NoneType'", r"invalid literal for", r"could not convert",
    r"TOMLDecodeError", r"Invalid value for",
    r"unsupported operand", r"index out of range", r"out of bounds for axis",
    r"not subscriptable", r"is not iterable", r"takes \d+ positional argument",
    r"got an unexpected keyword", r"missing \d+ required", r"No such option",
    r"unhashable type", r"cannot reshape", r"operands could not be broadcast",
    r"Got unexpected extra argument", r"embedded null", r"UnicodeDecodeError",
    r"can't convert", r"Tensor\b.*\bmeta\b", r"dtype\('O'\)",
    r"Object arrays cannot be loaded"]))


def error_lines(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("Error:")]


def check(out: Outcome, oracle, surface: str, *, names=(), allow_ok: bool = True) -> str:
    """The oracle: a result (exit 0 or 1 with output) or exactly one ``Error:`` line in the
    project's form (``oracle.check_message``, conftest.py) that names one of ``names`` (an
    option, a field, a file) where given; never a traceback, a library's message, a hang.
    The answer is tallied for ``surface``. Returns the error line ('' for a result)."""
    where = f"ctcbench {' '.join(out.args)}"
    assert not isinstance(out.exception, Hang), f"{where}: ran past its bound ({out.exception})"
    if out.exception is not None and not isinstance(out.exception, SystemExit):
        import traceback
        tb = "".join(traceback.format_exception(out.exception))
        raise AssertionError(f"{where}: a traceback:\n{tb[-3000:]}")
    assert out.exit_code in (0, 1, 2), f"{where}: exit {out.exit_code}\n{out.output[-2000:]}"
    leak = LEAKS.search(out.output)
    assert leak is None, f"{where}: a library's words ({leak.group(0)!r}):\n{out.output[-2000:]}"
    said = error_lines(out.output)
    if not said:
        assert allow_ok and out.exit_code in (0, 1), f"{where}: exit {out.exit_code} with no " \
                                                     f"Error: line\n{out.output[-2000:]}"
        oracle.record(surface, None)
        return ""
    assert len(said) == 1, f"{where}: {len(said)} Error: lines\n{out.output[-2000:]}"
    line = said[0]
    assert len(line) < 2000, f"{where}: an error line of {len(line)} characters"
    if names:
        assert any(str(n)[:60] in line for n in names if n), \
            f"{where}: the error names none of {names}: {line}"
    oracle.check_message(line.removeprefix("Error: "), where)
    oracle.record(surface, line.removeprefix("Error: "))
    return line

