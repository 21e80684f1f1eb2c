"""Progress of long commands on stderr, one convention for all of them.

On a terminal: a tqdm bar. On anything else (a log file, a pipe, CI): a plain line, never a
carriage return, the first after about a second and then one every ``CTCBENCH_PROGRESS_EVERY``
seconds (default 10), plus a last one when the work ends if any was written::

    compare: 37/122 cases, 12 s

Lines come from a timer thread too, so a single slow item (a large bench size, a backend that
hangs until its timeout) still shows the command is alive. With ``CTCBENCH_PROGRESS_EVERY=0``
every update writes a line. A one-off step that is usually quick but sometimes not (numba
loading its kernel, or compiling it the first time) says so with :func:`said_if_slow`.
"""
from __future__ import annotations

import contextlib
import os
import sys
import threading
import time
import weakref

EVERY_ENV = "CTCBENCH_PROGRESS_EVERY"
DEFAULT_EVERY = 10.0
FIRST_AFTER = 1.0  # seconds before the first line: quick commands stay quiet in logs
SLOW_AFTER = 3.0  # seconds before said_if_slow speaks: numba loads a cached kernel in ~1 s


def interval() -> float:
    """Seconds between plain progress lines, from ``CTCBENCH_PROGRESS_EVERY``."""
    text = os.environ.get(EVERY_ENV, "").strip()
    if not text:
        return DEFAULT_EVERY
    try:
        every = float(text)
    except ValueError:
        every = -1.0
    if not every >= 0:  # also NaN
        raise ValueError(f"{EVERY_ENV}: expected a number of seconds >= 0, got {text!r}")
    return every


def is_terminal(stream) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


class Progress:
    """Count work done: ``update(n)`` per item, ``note(text)`` for what is under way,
    ``stage(desc, total, unit)`` to start counting something else, ``close()`` at the end
    (or use it as a context manager).

    ``enabled``: ``False`` shows nothing; ``True`` or ``None`` a bar on a terminal, plain lines
    elsewhere. ``leave``: keep the finished bar on the terminal.
    """

    def __init__(self, desc: str, total: int | None = None, unit: str = "items", *,
                 enabled: bool | None = True, leave: bool = True, stream=None):
        self.desc, self.total, self.unit = desc, total, unit
        self.n, self.text = 0, ""
        self.stream = stream if stream is not None else sys.stderr
        self.start = self.last = time.monotonic()
        self.written, self.shown = False, None
        self.bar = self.timer = None
        self.lock = threading.Lock()
        self.closed = threading.Event()
        if enabled is False:
            self.mode = "off"
        elif is_terminal(self.stream):
            from tqdm import tqdm
            self.mode = "bar"
            self.bar = tqdm(total=total, desc=desc, unit=f" {unit}", file=self.stream, leave=leave)
        else:
            self.mode = "lines"
            self.every = interval()
            if self.every > 0:
                # the timer holds only a weak reference: a Progress dropped by an exception,
                # never closed, stops its timer when it is collected
                self.timer = threading.Thread(target=tick, args=(weakref.ref(self), self.closed),
                                              name="progress", daemon=True)
                self.timer.start()

    # -- counting -------------------------------------------------------------------------
    def update(self, n: int = 1) -> None:
        self.n += n
        if self.bar is not None:
            self.bar.update(n)
        elif self.mode == "lines":
            self._maybe_write()

    def note(self, text: str) -> None:
        """What is being worked on now (a size, a case), shown after the count."""
        self.text = text
        if self.bar is not None:
            self.bar.set_postfix_str(text)

    def say(self, text: str) -> None:
        """One line that stays (a stage finished, a one-off cost paid), above the bar on a
        terminal; nothing when progress is off."""
        if self.mode == "off":
            return
        with self.lock:
            if self.bar is not None:
                self.bar.write(text, file=self.stream)
            else:
                print(text, file=self.stream, flush=True)

    def stage(self, desc: str, total: int | None = None, unit: str | None = None) -> None:
        """Count a new stage of the same command from zero (keeps the clock running); in a
        log, the stage before ends on its last count, as ``close`` ends the work."""
        if self.mode == "lines":
            with self.lock:
                if self.written and self.shown != (self.desc, self.n):
                    self._emit()
        self.desc, self.total, self.n, self.text = desc, total, 0, ""
        self.unit = unit or self.unit
        if self.bar is not None:
            self.bar.reset(total=total)
            self.bar.unit = f" {self.unit}"
            self.bar.set_description_str(desc)
        elif self.mode == "lines" and self.every == 0:
            self._write()

    def close(self) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        if self.bar is not None:
            self.bar.close()
        if self.timer is not None:
            self.timer.join()
        if self.mode == "lines" and self.written and self.shown != (self.desc, self.n):
            self._write()  # the last count, so a log shows where the work ended

    def __enter__(self) -> "Progress":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- plain lines ----------------------------------------------------------------------
    def line(self) -> str:
        """``desc: n/total unit, elapsed s (note)``."""
        count = f"{self.n}/{self.total}" if self.total is not None else f"{self.n}"
        elapsed = time.monotonic() - self.start
        return (f"{self.desc}: {count} {self.unit}, {elapsed:.0f} s"
                + (f" ({self.text})" if self.text else ""))

    def _write(self) -> None:
        with self.lock:
            self._emit()

    def _emit(self) -> None:
        try:
            self.stream.write(self.line() + "\n")
            self.stream.flush()
        except (ValueError, OSError):  # the stream was closed under us: stop writing
            self.mode = "off"
        self.last, self.written, self.shown = time.monotonic(), True, (self.desc, self.n)

    def due_in(self) -> float:
        """Seconds until the next plain line is due (0 or less: due now)."""
        if self.every == 0:
            return 0.0
        if not self.written:
            return self.start + min(FIRST_AFTER, self.every) - time.monotonic()
        return self.last + self.every - time.monotonic()

    def _maybe_write(self) -> None:
        with self.lock:  # the timer thread and update() must not both write one line
            if self.mode == "lines" and self.due_in() <= 0:
                self._emit()


@contextlib.contextmanager
def said_if_slow(text: str, after: float = SLOW_AFTER, stream=None):
    """Run the block; if it is still running ``after`` seconds in, write ``text`` on stderr
    (or ``stream``) as one line, from a timer thread, so that a pause the caller did not
    expect (a training step stopped for a compile) is explained while it lasts."""
    stream = stream if stream is not None else sys.stderr

    def say():
        try:
            print(text, file=stream, flush=True)
        except (ValueError, OSError):  # the stream was closed under us
            pass
    timer = threading.Timer(after, say)
    timer.daemon = True
    timer.start()
    try:
        yield
    finally:
        timer.cancel()
        timer.join()


def tick(ref, closed: threading.Event) -> None:
    """The timer of a line-writing ``Progress``: sleep until a line is due, write it if no
    update() did. Wakes about once a line, so it costs a timed benchmark nothing."""
    wait = 0.0
    while not closed.wait(wait):
        progress = ref()
        if progress is None:
            return
        progress._maybe_write()
        wait = max(progress.due_in(), 0.05)
        del progress
