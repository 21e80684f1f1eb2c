"""Conformance of a CTC function inside its own test suite, the way ``numpy.testing`` asserts.

    from ctcbench.testing import assert_ctc_conformant
    assert_ctc_conformant("mypkg.ctc:ctc_loss")          # or the function itself

runs the case library on the function as ``ctcbench compare --function`` does (in a worker
process) and raises an ``AssertionError`` that names the common faults the failures show, one
``cause:`` line each (``ctcbench.compare.causes``), then lists each failing row: the case and
dtype, the loss and gradient errors and the bound, and the command that reproduces it. The
pytest plugin (``pytest -p ctcbench.pytest_plugin --ctcbench-function PKG.MOD:NAME``) makes
each case a test.
"""
from __future__ import annotations

import shlex
import tempfile

from ctcbench.errors import fail
from ctcbench.runs.kinds import read_meta
from ctcbench.runtime.status import FAILING



def target_of(fn) -> str:
    """``"pkg.mod:name"`` of a function (or that string itself), importable in a worker."""
    if isinstance(fn, str):
        return fn
    module, name = getattr(fn, "__module__", None), getattr(fn, "__qualname__", "")
    if not callable(fn) or module in (None, "__main__") or "<" in name:
        fail("fn", "a module-level function (or 'pkg.mod:name') a worker process can import",
             repr(fn))
    return f"{module}:{name}"


def command(target: str, case: str | None = None, dtype: str | None = None,
            convention: str | None = None) -> str:
    """The ``ctcbench compare`` line that checks ``target`` (on one case and dtype)."""
    words = ["ctcbench", "compare", "--function", target]
    words += ["--convention", convention] if convention else []
    words += ["--case", case] if case else []
    words += ["--dtype", dtype] if dtype else []
    return shlex.join(words)


def describe(row: dict, convention: str | None = None) -> str:
    """One failing row for people: what failed, by how much, and how to see it again."""
    def num(key):
        v = row.get(key)
        return "-" if v is None else f"{float(v):.2g}"
    bound = row.get("tolerance")
    return (f"{row['case']} [{row['dtype']}] {row['status']}: loss error {num('abs_err')}, "
            f"gradient error {num('grad_err')}" + (f", bound {bound}" if bound else "")
            + f"; {row.get('reason') or ''}".rstrip("; ")[:400]
            + f"\n    reproduce: {command(row['backend'], row['case'], row['dtype'], convention)}")


def _bound(tol: dict | None) -> str | None:
    if not tol:
        return None
    return (f"loss within {tol['loss_atol']:g} + {tol['loss_rtol']:g} x |expected|, "
            f"gradient within {tol['grad_atol']:g}")


def assert_ctc_conformant(fn, *, cases=None, dtypes=None, convention: str | None = None,
                          device: str = "cpu", known_issues=None, accept_known=(),
                          fuzz_budget: float = 0, out=None) -> None:
    """Raise ``AssertionError`` unless ``fn`` (a function or ``"pkg.mod:name"``) gets every
    case of the library right, loss and gradient; pass silently otherwise.

    ``cases``: name globs (default all); ``dtypes``: only these; ``convention``: for a
    function whose parameter names do not say (``ctcbench.runtime.functions``);
    ``known_issues``: your known_issues.toml, whose failures do not count; ``accept_known``:
    frameworks your function wraps (``["torch"]``), whose known issues do not count either
    (``ctcbench.compare.inherited``); ``fuzz_budget``:
    seconds of ``ctcbench fuzz`` against the reference after the cases; ``out``: the run
    folder (default a temporary one, named in the message).
    """
    from ctcbench.compare.run import compare
    target = target_of(fn)
    out = out or tempfile.mkdtemp(prefix="ctcbench-")
    result = compare(None, list(cases) if cases else None, list(dtypes) if dtypes else None,
                     functions=[target], convention=convention, device=device,
                     known_issues=known_issues, out=f"{out}/compare", progress=False,
                     plot=False, accept_known=tuple(accept_known))
    rows = [r for r in result.rows.to_dict("records")
            if r["backend"] == target and r["status"] in FAILING]
    config = (read_meta(result.run_dir) or {}).get("config") or {}
    tolerances = config.get("tolerances", {})  # "case/dtype" -> compare's tolerance
    lines = [describe({**r, "tolerance": _bound(tolerances.get(f"{r['case']}/{r['dtype']}"))},
                      convention) for r in rows]
    if fuzz_budget:
        from ctcbench.fuzz.run import fuzz
        found = fuzz(target, budget=fuzz_budget, out=f"{out}/fuzz", progress=False).summary
        if found.get("found"):
            lines.append(f"fuzz found {found.get('what')} at size {found.get('size')} "
                         f"[{found.get('dtype')}]: case file {found.get('case_file')}")
    if not result.summary.get("checked") and not lines:
        lines.append(f"no case was checked ({result.summary.get('counts')})")
    if lines:
        causes = [f"cause: {line}" for line in result.summary.get("causes", [])]
        raise AssertionError(f"{target}: {len(lines)} failing, results in {out}\n"
                             + "\n".join(f"  {line}" for line in causes + lines))
