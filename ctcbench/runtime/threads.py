"""Thread counts, parsed and checked in this one place.

``--threads`` (``ctcbench bench``) takes one count or a list such as ``1,2``; the count in
use travels to worker processes and framework adapters as ``CTCBENCH_THREADS``. Every
reader goes through :func:`thread_count` or :func:`thread_counts`, so a bad value is the
same one-line ``NAME: expected ..., got ...`` wherever it was written.
"""
from __future__ import annotations

import os
from collections.abc import Mapping, MutableMapping
from numbers import Integral

from ctcbench.errors import expect, fail

THREADS_ENV = "CTCBENCH_THREADS"  # when set, workers and adapters use this many threads
# the usual variables of OpenMP, OpenBLAS and MKL; read by those libraries when they load
LIBRARY_ENVS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


PER_CPU = 4  # at most this many threads per CPU here: more time the OS's scheduler, and
# a typo (99999) would fail deep in a thread pool ("can't start new thread") mid-run


def most_threads() -> int:
    return PER_CPU * (os.cpu_count() or 1)


def count_words() -> str:
    """What a thread count must be, in every error that refuses one."""
    return f"an integer in [1, {most_threads()}] ({PER_CPU} per CPU here)"


def count_check():
    """A thread-count setting's check (``ctcbench.settings``): what ``thread_count`` takes."""
    return (lambda v: 1 <= v <= most_threads(), count_words())


def thread_count(value, name: str = "threads") -> int:
    """One thread count: an int from 1 to ``most_threads()``, or a string holding one
    (``" 2"``)."""
    if isinstance(value, str):
        try:
            count = int(value.strip())
        except ValueError:
            fail(name, count_words(), repr(value))
    elif isinstance(value, Integral) and not isinstance(value, bool):
        count = int(value)
    else:
        fail(name, count_words(), repr(value))
    expect(1 <= count <= most_threads(), name, count_words(), repr(value))
    return count


def thread_counts(value, name: str = "threads") -> list[int]:
    """``2``, ``[1, 2]`` or ``"1,2"`` -> ``[1, 2]``: the counts in the order given, each once."""
    items = value.split(",") if isinstance(value, str) else (
        [value] if isinstance(value, Integral) else value)
    try:
        counts = [thread_count(x, name) for x in items]
    except (TypeError, ValueError):  # not iterable, or an item that is no count
        counts = []
    expect(bool(counts) and not isinstance(value, bool), name,
           "a count >= 1 or a comma-separated list like 1,2", repr(value))
    return list(dict.fromkeys(counts))


def requested(environ: Mapping[str, str] | None = None) -> int | None:
    """The count ``CTCBENCH_THREADS`` asks for; ``None`` when it is unset or empty."""
    raw = (os.environ if environ is None else environ).get(THREADS_ENV, "")
    return thread_count(raw, THREADS_ENV) if raw.strip() else None


def use_threads(n: int, environ: MutableMapping[str, str] | None = None) -> int:
    """Set ``CTCBENCH_THREADS`` and the libraries' variables to ``n`` (in ``os.environ`` by
    default): effective for worker processes and libraries loaded after this call."""
    n = thread_count(n)
    env = os.environ if environ is None else environ
    for var in (*LIBRARY_ENVS, THREADS_ENV):
        env[var] = str(n)
    return n


def worker_env(environ: MutableMapping[str, str]) -> int | None:
    """Pass the requested count on to a worker's environment ``environ`` (the libraries'
    variables set from ``CTCBENCH_THREADS``, whose value is checked here); the count or None."""
    n = requested(environ)
    if n is not None:
        for var in LIBRARY_ENVS:
            environ[var] = str(n)
    return n
