"""The self-fuzz suite's settings and its oracle: what ctcbench may answer to generated input.

Quick by default (a fixed, derandomised handful of examples per test). Longer:
``CTCBENCH_SELFFUZZ_EXAMPLES=N`` draws N examples per test from a fresh random seed
(docs/bad-input.md, "Self-fuzz"). The profile ``ctcbench-selffuzz`` is applied per test
(``@settings(parent=settings.get_profile("ctcbench-selffuzz"))``), never loaded globally, so
the rest of the suite's hypothesis tests keep their own settings. The oracle is the session
fixture ``oracle``; ``CTCBENCH_SELFFUZZ_REPORT=FILE`` appends to FILE one line per input
tried: its surface, a tab, and the error line it got (empty for a result).
"""
from __future__ import annotations

import os
import re

import pytest
from hypothesis import HealthCheck, settings

_EXAMPLES = os.environ.get("CTCBENCH_SELFFUZZ_EXAMPLES")
_COMMON = dict(deadline=None, database=None, print_blob=True,
               suppress_health_check=list(HealthCheck))
settings.register_profile("ctcbench-selffuzz-quick", max_examples=12, derandomize=True, **_COMMON)
settings.register_profile("ctcbench-selffuzz-long", max_examples=int(_EXAMPLES or 1000),
                          derandomize=False, **_COMMON)
settings.register_profile("ctcbench-selffuzz", settings.get_profile(
    "ctcbench-selffuzz-long" if _EXAMPLES else "ctcbench-selffuzz-quick"))

# -- the oracle --------------------------------------------------------------------------------
FORM = re.compile(r"^(?P<name>\S.*?): expected (?P<want>.+), got (?P<got>.*)$")
# a last-resort wrapper round an exception that no check caught: the field went unchecked
CATCH_ALL = ("expected a buildable case, got",)
# words of Python, NumPy, torch, zipfile, TOML and click internals, never of a ctcbench check
LEAKS = re.compile(
    r"Traceback|zero-size array|could not convert|invalid literal|object of type|unsupported "
    r"operand|NoneType|not subscriptable|has no attribute|index out of range|list index|"
    r"out of bounds|cannot be interpreted|Seed must be|unhashable|not iterable|positional "
    r"argument|object is not|not supported between|cannot reshape|must be real number|"
    r"setting an array element|inhomogeneous|OverflowError|Python int too large|"
    r"maximum recursion|division by zero|math domain")
QUOTED = re.compile(r"'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\"")
HANG_S = float(os.environ.get("CTCBENCH_SELFFUZZ_HANG_S", 60))  # an answer within this, or a hang


class Finding(AssertionError):
    """A generated input that ctcbench answered with something other than its error form."""


def check_message(message: str, what: str = "") -> str:
    """The one-line ``NAME: expected X, got Y`` of ctcbench, with no library words in it;
    returns it. ``what``: the input, for the report of a finding."""
    lines = [line for line in str(message).splitlines() if line.strip()]
    if len(lines) != 1:
        raise Finding(f"{what}: expected one line, got {len(lines)}: {message!r}")
    line = lines[0]
    if not FORM.match(line):
        raise Finding(f"{what}: not in the form 'NAME: expected X, got Y': {line!r}")
    own = QUOTED.sub("''", line)  # the user's own values, echoed, may hold any words
    # a reader's "unreadable file (Library's reason)": named, said, the reason kept as context
    own = re.sub(r"got an unreadable file \(.*\)$", "got an unreadable file", own)
    if any(c in line for c in CATCH_ALL) or LEAKS.search(own):
        raise Finding(f"{what}: a library's words leaked: {line!r}")
    return line


def check_error(exc: BaseException, what: str = "") -> str:
    """A library reader's refusal: a ValueError (or FileNotFoundError) in the error form."""
    if not isinstance(exc, (ValueError, FileNotFoundError)):
        raise Finding(f"{what}: raised {type(exc).__name__}: {exc}") from exc
    return check_message(str(exc), what)


def check_cli(result, what: str = "", *, ok=(0, 1)) -> str | None:
    """A ``CliRunner`` result: exit ``ok`` with output, or one ``Error:`` line in the error
    form (exit 1; exit 2 for click's own usage errors). Returns the error line, or None."""
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        exc = result.exception
        raise Finding(f"{what}: a traceback: {type(exc).__name__}: {exc}") from exc
    errors = [line for line in result.output.splitlines() if line.startswith("Error: ")]
    if result.exit_code in ok and not errors:
        return None
    if result.exit_code not in (1, 2) or len(errors) != 1:
        raise Finding(f"{what}: exit {result.exit_code}, {len(errors)} Error lines: "
                      f"{result.output[-500:]!r}")
    return check_message(errors[0].removeprefix("Error: "), what)


def bounded(seconds: float = HANG_S, what: str = ""):
    """Fail with a Finding when the block runs past ``seconds`` (SIGALRM: main thread only)."""
    from .strategies_cli import bounded as alarm
    return alarm(seconds, Finding(f"{what}: no answer within {seconds} s (a hang)"))


class Oracle:
    """The checks above, and a tally of what each surface was given and answered."""

    Finding = Finding
    check_message = staticmethod(check_message)
    check_error = staticmethod(check_error)
    check_cli = staticmethod(check_cli)
    bounded = staticmethod(bounded)

    def __init__(self):
        self.tried: dict[str, int] = {}
        self.lines: dict[str, set[str]] = {}

    def record(self, surface: str, line: str | None) -> None:
        """One input of ``surface`` answered with the error ``line`` (None: a result); with
        ``CTCBENCH_SELFFUZZ_REPORT`` set, appended to that file at once (a run stopped by a
        timeout keeps its tally)."""
        self.tried[surface] = self.tried.get(surface, 0) + 1
        if line is not None:
            self.lines.setdefault(surface, set()).add(line)
        if os.environ.get("CTCBENCH_SELFFUZZ_REPORT"):
            with open(os.environ["CTCBENCH_SELFFUZZ_REPORT"], "a", encoding="utf-8") as f:
                f.write(f"{surface}\t{line or ''}\n")


@pytest.fixture(scope="session")
def oracle():
    """The oracle every self-fuzz test judges its answers by (see the module docstring)."""
    return Oracle()
