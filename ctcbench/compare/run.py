"""The ``compare`` driver: every backend x case x dtype, checked for loss and gradient.

The checks of one row are in ``ctcbench.compare.checks``, the table in
``ctcbench.compare.table``. Rows go to ``rows.jsonl`` in the run folder as they are finished
(see ``ctcbench.runs.store``), so ``resume`` can pick up an interrupted run.
"""
from __future__ import annotations

import numpy as np

from ctcbench.caselib.library import load_cases, select_cases
from ctcbench.compare.checks import RERUN, check, prepare_all
from ctcbench.compare.kind import KEY, KIND
from ctcbench.compare.extra import API, check_error
from ctcbench.compare.table import df_records, summarize, tidy, to_csv
from ctcbench.core.problem import FLOAT_DTYPES
from ctcbench.errors import one_of
from ctcbench.progress import Progress
from ctcbench.runtime.protocol import BackendUnavailable
from ctcbench.runtime.registry import (REFERENCE, backend_names, backend_versions,
                                       check_backend_names, get_backend)
from ctcbench.runs.store import RunResult, check_out, open_run
from ctcbench.files import atomic_write, to_json


def compare(backends=None, cases=None, dtypes=None, *, case_dirs=None, out=None,
            resume: bool = False, progress: bool | None = None, plot: bool = False) -> RunResult:
    """Check backends on cases; one tidy row per (backend, case, dtype, device).

    Args:
      backends: backend names; default every registered backend (unavailable ones -> skipped).
      cases: ``Case`` objects, or name globs selecting from ``case_dirs`` (default the
        built-in library); default every case.
      dtypes: restrict to these dtypes; default each case's own list.
      out: run folder (default ``reports/compare-<UTC time>``); one that already holds a run
        is refused unless ``resume``, which keeps the rows an earlier run left in it and does
        only the rest; rows that ended in ``error``, ``crashed`` or ``timeout`` may be
        transient and run again (see ``ctcbench.runs.store.open_run``).
      progress: ``False`` for none; else a bar on a terminal, plain lines otherwise
        (ctcbench.progress).
      plot: also save ``margins.png``, a heat map of error / tolerance (``compare.plot``).
    Returns:
      ``RunResult``: ``rows`` failures first, ``summary`` as ``summarize`` gives it,
      ``resumed`` the rows kept from the earlier run.
    """
    check_out(KIND, out, resume=resume)  # before any work: a refused folder is one line
    one_of("dtype", dtypes or (), FLOAT_DTYPES)
    check_backend_names(backends or ())
    if cases is None or all(isinstance(c, str) for c in cases):
        cases = select_cases(load_cases(case_dirs), cases or None)
    jobs = [(case, dtype) for case in cases for dtype in case.dtypes
            if dtypes is None or dtype in dtypes]
    bar = Progress("compare (preparing cases)", total=len(jobs), unit="cases", enabled=progress,
                   leave=False)
    try:
        preps = prepare_all(cases, dtypes, progress=bar)  # every case builds before anything runs
    except ValueError:
        bar.close()
        raise
    names = list(dict.fromkeys(backends)) if backends else backend_names()
    with open_run(KIND, out, resume=resume) as run:
        df, kept = _run(run, names, cases, dtypes, jobs, preps, bar)
        atomic_write(run.run_dir / "rows.csv", to_csv(df))
        atomic_write(run.run_dir / "rows.json", to_json(df_records(df), indent=1) + "\n")
        files = [run.run_dir / "rows.csv", run.run_dir / "rows.json"]
        if plot and (df["case"] != "*").any():
            from ctcbench.compare.plot import plot_margins
            files.append(plot_margins(df, run.run_dir / "margins.png"))
    return RunResult(run.run_dir, df, summarize(df, run.run_dir), run.environment,
                     resumed=len(kept), files=files)


def _run(run, names, cases, dtypes, jobs, preps, bar):
    """The rows of one compare run into the open folder ``run``; (all rows, rows kept)."""
    # skipped rows are redone every run (the backend may be available now), failures that
    # may be transient are run again; everything else is kept as it was.
    kept = run.keep_rows(lambda r: r.get("status") not in ("skipped",) + RERUN)
    done = {tuple(r.get(k) for k in KEY) for r in kept}
    rows, ready = [], []
    bar.note("loading backends")
    for name in names:
        try:
            ready.append(get_backend(name))
        except BackendUnavailable as exc:
            rows.append({"backend": name, "case": "*", "dtype": "*", "device": "-",
                         "status": "skipped", "reason": str(exc)})
        except KeyError:
            raise
        except Exception as exc:  # a broken plugin is an error, not a crash of the run
            rows.append({"backend": name, "case": "*", "dtype": "*", "device": "-",
                         "status": "error",
                         "reason": f"failed to load: {type(exc).__name__}: {exc}"})
    ref = None
    try:
        ref = get_backend(REFERENCE)
    except Exception:  # rows will say the reference failed
        pass
    for backend in ready:
        _warm_up(backend)
    run.write_meta({"driver": "compare", "backends": names, "reference": REFERENCE,
                    "cases": [c.name for c in cases], "dtypes": list(dtypes or []),
                    "tolerances": {f"{case.name}/{dtype}": _tolerance(case, dtype)
                                   for case, dtype in jobs},
                    "backend_versions": backend_versions(ready), "resumed_rows": len(kept)})
    for row in rows:
        run.log.append(row)
    bar.stage("compare", total=len(jobs) * len(ready), unit="runs")
    for case, dtype in jobs:
        prep = preps[case.name, dtype]
        if "error" in case.expect:  # one row: the API itself must refuse the input
            if (API, case.name, dtype, "-") not in done:
                row = check_error(case, dtype, prep.variants[0].raw)
                run.log.append(row)
                rows.append(row)
            bar.update(len(ready))
            continue
        for backend in ready:
            device = backend.traits.device
            if (backend.name, case.name, dtype, device) not in done:
                row = check(backend, prep, ref)
                run.log.append(row)
                rows.append(row)
            bar.update()
        prep.reference = None  # the reference's tables can be large; done with this case
    bar.close()
    return tidy(kept + rows), kept


def _tolerance(case, dtype: str) -> dict:
    """The tolerance a (case, dtype) is checked with, as the report shows it."""
    tol = case.tolerance(dtype)
    return {"loss_atol": tol.loss_atol, "loss_rtol": tol.loss_rtol, "grad_atol": tol.grad_atol}


def _warm_up(backend) -> None:
    """One tiny run first, so one-off start-up costs (lazy imports, kernels) stay out of time_s."""
    from ctcbench.core.problem import CTCProblem
    problem = CTCProblem(np.zeros((2, 1, 3), np.float32), [[1]], [2], [1])
    try:
        backend.run(problem)
    except Exception:  # the real rows will report whatever is wrong
        pass


