"""A user's CTC function registered as a backend (``--function PKG.MOD:NAME``), checked at once.

The function's module is imported in its worker process only; the current folder is put on
the path first, as ``python -m`` and uvicorn do, so a module beside the user is found. The
worker imports it, reads its convention and probes it (``ctcbench/runtime/function_backend.py``); whatever
is wrong comes back here as one error naming ``--function`` (or ``--convention``,
``--device``) before any case runs.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
import sys

from ctcbench.errors import InputError, expect, fail, one_of
from ctcbench.runtime.devices import DEVICES
from ctcbench.runtime.function_backend import CONVENTIONS, probe_problem
from ctcbench.runtime.protocol import BackendCrashed, BackendTimeout, UnsupportedProblem
from ctcbench.runtime.registry import get_backend, register_backend

FACTORY = "ctcbench.runtime.function_backend:FunctionBackend"
TARGET = re.compile(r"[A-Za-z_][\w]*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")


def check_target(target, option: str, example: str) -> None:
    """``target`` is ``PKG.MOD:NAME`` and its top module is found, with the current folder put
    on the path first (the worker's path is this one, through PYTHONPATH), as ``python -m``
    does; else one error naming ``option``."""
    expect(isinstance(target, str) and bool(TARGET.fullmatch(target)), option,
           f"PKG.MOD:NAME, a module path, a colon and a function name (e.g. {example})",
           repr(target))
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    top = target.partition(":")[0].split(".")[0]
    if importlib.util.find_spec(top) is None:
        fail(option, f"a module {top!r} on the path (the current folder {os.getcwd()} is on it)",
             f"{target} (no module {top!r})")


def add_function(target: str, *, convention: str | None = None, device: str = "cpu",
                 known_issues=None, option: str = "--function") -> tuple[str, str]:
    """Register the CTC function at ``target`` (``"pkg.mod:name"``) as the backend of that
    name, start it in its worker and probe it; returns ``(name, what the probe found)``.
    ``known_issues``: ``{"case-glob/dtype-glob": reason}``, the failures its implementer
    knows of, recorded as ``known`` (xfail in the pytest plugin)."""
    check_target(target, option, "mypkg.ctc:loss")
    if convention is not None:
        one_of("--convention", convention, CONVENTIONS)
    one_of("--device", device, DEVICES)
    register_backend(target, functools.partial(_factory(), target=target, convention=convention,
                                               device=device, known_issues=known_issues or {}),
                     replace=True)
    backend = get_backend(target)
    backend.close()  # a worker left from an earlier call holds the module as it was then
    try:
        return target, _probe_note(backend)
    except InputError:
        backend.close()
        raise
    except (BackendCrashed, BackendTimeout) as exc:
        backend.close()
        fail(option, "a function its worker can import and call", f"{target}: {exc}")


def add_functions(targets, *, convention: str | None = None, device: str = "cpu",
                  known_issues=None, say=print) -> list[str]:
    """:func:`add_function` for each of ``targets``; ``say`` gets what each probe found.
    ``known_issues``: target -> its ``{"case/dtype" glob: reason}``. Returns their names."""
    names = []
    for target in dict.fromkeys(targets or ()):
        name, found = add_function(target, convention=convention, device=device,
                                   known_issues=(known_issues or {}).get(target))
        say(found)
        names.append(name)
    return names


def _factory():
    from ctcbench.runtime.factory import load_factory
    return load_factory(FACTORY)


def _probe_note(backend) -> str:
    """The first note of a call on the probe's problem: what the worker's probe found."""
    for dtype in ("float32", "float64", "float16"):
        try:
            result = backend.run(probe_problem(dtype))
        except UnsupportedProblem:
            continue
        except InputError:
            raise
        except Exception as exc:  # it ran in the probe, then failed: say what it raised
            fail("--function", "a function that returns one loss per sequence",
                 f"{backend.name}: {exc}"[:600])
        return result.notes[0] if result.notes else backend.name
    return backend.name
