"""The ``compare`` driver: every backend x case x dtype, checked for loss and gradient.

The checks of one row are in ``ctcbench.compare.checks``, the table in
``ctcbench.compare.table``. Rows go to ``rows.jsonl`` in the run folder as they are finished
(see ``ctcbench.runs.store``), so ``resume`` can pick up an interrupted run.
"""
from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import Future

import numpy as np

from ctcbench.caselib.decoder_cases import load_decoder_cases, select_decoder_cases
from ctcbench.caselib.known import load_known_issues
from ctcbench.caselib.library import load_cases, select_cases
from ctcbench.compare.baseline import against_baseline, load_baseline
from ctcbench.compare.baseline import save_baseline as write_baseline
from ctcbench.compare.causes import (CONFIG, cause_lines, check_function, find_causes,
                                     lead_reasons)
from ctcbench.compare.checks import check, prepare_all
from ctcbench.compare.config import CompareSettings
from ctcbench.compare.inherited import Inheritance
from ctcbench.compare.decoders import (decoder_rows, default_decoders, named_decoders,
                                       no_decoder_case,
                                       stale_decoder_issues)
from ctcbench.compare.kind import KEY, KIND, load_failure
from ctcbench.compare.resumed import merged, resumed_selection, stored_config
from ctcbench.compare.slow import SlowCases, cheapest_first
from ctcbench.compare.stale import regressions, stale_known_issues
from ctcbench.compare.extra import API, check_error
from ctcbench.compare.table import df_records, summarize, tidy, to_csv
from ctcbench.core.problem import FLOAT_DTYPES
from ctcbench.errors import one_of
from ctcbench.progress import Progress
from ctcbench.runtime.decoders import check_decoder_names
from ctcbench.runtime.decoders import expand_decoder_names as expand
from ctcbench.runtime.functions import add_functions
from ctcbench.runtime.registry import (REFERENCE, backend_names, backend_versions,
                                       check_backend_names, get_backend)
from ctcbench.runs.store import RunResult, check_out, open_run
from ctcbench.runtime.status import TRANSIENT, Status
from ctcbench.files import atomic_write, check_output_file, to_json
from ctcbench.settings import from_options

WARM_UP_SAID = 2.0  # seconds: a warm-up this slow is said on a line of its own, with its notes


def compare(backends=None, cases=None, dtypes=None, *, case_dirs=None, out=None,
            resume: bool = False, progress: bool | None = None,
            functions=(), convention: str | None = None, device: str = "cpu",
            known_issues=None, save_baseline=None, baseline=None, decoders=None,
            aligners=None, score=None,
            **options) -> RunResult:
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
      functions: ``"pkg.mod:name"`` CTC functions to check as backends of those names (with
        no ``backends``, only they are checked), in ``convention`` (default: read off each
        one's parameters) on ``device``: ``ctcbench.runtime.functions``; ``known_issues``,
        a known_issues.toml naming them, makes the failures it lists ``known``.
      save_baseline: write every checked row's numbers to this file (``compare.baseline``);
      baseline: such a file: a row whose numbers moved by more than ``max_change`` from it
        fails the run (``summary["baseline"]``), even within the tolerances.
      decoders: decoder and aligner names (``"all"``: every registered one) to check on the
        decoder case library (``ctcbench.compare.decoders``); default ctcbench's own when no
        ``backends`` or ``functions`` are named, none otherwise. Named alone, only they run.
        A ``"pkg.mod:name"`` among them, or in ``aligners``, is a user's decoder (aligner)
        function, registered and probed in its worker (``ctcbench.runtime.decoder_functions``);
        ``score`` declares the scores of those that do not (``labelling``, ``path``, ``none``).
      options: the fields of :class:`ctcbench.compare.config.CompareSettings`: ``plot``
        (default True) also saves ``margins.png``, a heat map of error / tolerance
        (``compare.plot``); ``max_change`` (default 0), as above; ``accept_known``: frameworks
        whose known issues a function's rows inherit as ``known`` (``compare.inherited``).
    Returns:
      ``RunResult``: ``rows`` failures first, ``summary`` as ``summarize`` gives it,
      ``resumed`` the rows kept from the earlier run.
    """
    check_out(KIND, out, resume=resume)  # before any work: a refused folder is one line
    stored = stored_config(out) if resume else {}  # what is not given again: the folder's
    backends, decoders, cases, dtypes = resumed_selection(
        stored, out, backends=backends, functions=functions, decoders=decoders,
        aligners=aligners, cases=cases, dtypes=dtypes)
    decoders = named_decoders(decoders, aligners, score, progress)  # functions registered
    one_of("dtype", dtypes or (), FLOAT_DTYPES)
    check_backend_names(backends or ())
    s = from_options(CompareSettings, options, "compare()")
    saved = load_baseline(baseline) if baseline is not None else None
    if save_baseline is not None:
        check_output_file(save_baseline, "save_baseline", "a baseline", (".json",))
    decoder_list, decoder_cases, cases = _decoders(decoders, backends or functions, cases,
                                                   case_dirs)
    if (decoders and not (backends or functions)) or cases == []:
        cases = []  # decoders named alone, or only decoder cases asked for: no loss row
    elif cases is None or all(isinstance(c, str) for c in cases):
        cases = select_cases(load_cases(case_dirs), cases or None)
    jobs = [(case, dtype) for case in cases for dtype in case.dtypes
            if dtypes is None or dtype in dtypes]
    bar = Progress("compare (preparing cases)", total=len(cases), unit="cases",
                   enabled=progress, leave=False)
    known = known_of(known_issues, functions) if known_issues is not None else None
    added = add_functions(functions, convention=convention, device=device, known_issues=known,
                          say=bar.say)
    names = (list(dict.fromkeys([*(backends or ()), *added])) if backends or added
             else [] if decoders else backend_names())
    bar.note("loading backends")
    ready, failed = _load(names)
    # warm-ups (a numba compile: ~20-30 s cold) run while the cases build and the other
    # backends' rows run; a backend's rows wait for its own warm-up only
    warming = {b.name: _in_background(_warm_up, b) for b in ready}
    try:
        preps = prepare_all(cases, dtypes, progress=bar)  # every case builds before any row
    except ValueError:
        bar.close()
        raise
    slow = SlowCases(added, s.predict_limit, say=bar.say)  # a function's slow cases skipped
    with open_run(KIND, out, resume=resume) as run, Inheritance(s.accept_known) as inherit:
        df, kept = _run(run, names, ready, failed, warming, cases, dtypes, jobs, preps, bar,
                        explain=added, inherit=inherit, slow=slow,
                        decoders={"decoders": decoder_list,
                                  "decoder_cases": [c.name for c in decoder_cases]})
        if decoder_list:
            bar.stage("compare decoders", total=len(decoder_list) * len(decoder_cases),
                      unit="runs")
            finished = {(r.get("backend"), r.get("case")) for r in kept
                        if r.get("backend") in decoder_list}
            versions = {}
            df = tidy(df_records(df) + decoder_rows(decoder_list, decoder_cases,
                                                    append=run.log.append, update=bar.update,
                                                    done=finished, versions=versions))
            run.write_meta({**run.meta["config"], "decoders": decoder_list,
                            "decoder_cases": [c.name for c in decoder_cases],
                            "decoder_versions": versions})
        bar.close()
        if stored:  # a resumed run that added to the folder: its meta.json names both
            run.write_meta({**run.meta["config"], **merged(run.meta["config"], stored)})
        causes = find_causes(run.rows(), preps, added)  # loss faults named (compare.causes)
        if causes:
            df = lead_reasons(df, causes)
            run.write_meta({**run.meta["config"], CONFIG: causes})
        atomic_write(run.run_dir / "rows.csv", to_csv(df))
        atomic_write(run.run_dir / "rows.json", to_json(df_records(df), indent=1) + "\n")
        files = [run.run_dir / "rows.csv", run.run_dir / "rows.json"]
        if s.plot and (df["case"] != "*").any():
            from ctcbench.compare.plot import plot_margins
            files.append(plot_margins(df, run.run_dir / "margins.png"))
        summary = summarize(df, run.run_dir)
        summary["stale_known"] = stale_known_issues(
            df_records(df), {b.name: b for b in ready}, backend_versions(ready)
        ) + stale_decoder_issues(df_records(df), decoder_list)
        summary["regressions"] = regressions(df_records(df))
        summary["slow"] = slow.lines()
        summary["causes"] = cause_lines(causes)
        raw = [r for r in run.rows()
               if r.get("status") in (Status.OK, Status.MISMATCH, Status.KNOWN)]
        if save_baseline is not None:
            count = write_baseline(raw, save_baseline,
                                   backend_versions=backend_versions(ready))
            summary["baseline_saved"] = f"saved {count} rows' numbers to {save_baseline}"
        if saved is not None:
            summary["baseline"] = against_baseline(raw, saved, s.max_change)
            summary["failed"] = bool(summary["failed"] or summary["baseline"]["failed"])
    return RunResult(run.run_dir, df, summary, run.environment, resumed=len(kept), files=files)


def _decoders(decoders, named_backends, cases, case_dirs) -> tuple[list[str], list, object]:
    """The decoders a run checks, their cases, and the loss cases (or globs) left: checked
    before any work. A glob selects in both libraries; one that matches no loss case is left
    out of the loss selection (a glob matching neither is refused there, naming both). With
    decoders named alone, ``case_dirs`` hold decoder cases (a fuzz find, say)."""
    names = expand(decoders) if decoders else ([] if named_backends else default_decoders())
    check_decoder_names(names, "decoder")
    if not names:
        return [], [], cases
    alone = decoders and not named_backends
    if case_dirs and not alone:
        return [], [], cases  # --cases holds loss cases: no decoder row
    library = load_decoder_cases(case_dirs if alone else None)
    globs = cases if cases and all(isinstance(c, str) for c in cases) else None
    if not globs:
        return names, library, cases
    chosen = select_decoder_cases(library, globs)
    if not chosen and alone:
        no_decoder_case(globs, library)
    if alone:
        return names, chosen, []
    loss = load_cases(case_dirs)
    rest = [g for g in globs if _matches(loss, g) or not select_decoder_cases(library, [g])]
    return names, chosen, rest if rest else []


def _matches(cases, glob: str) -> bool:
    try:
        return bool(select_cases(cases, [glob]))
    except ValueError:  # it matches none of them
        return False


def known_of(path, targets) -> dict[str, dict[str, str]]:
    """Target -> ``{"case-glob/dtype-glob": reason}``: the issues of an implementer's
    known_issues.toml (the format of cases/known_issues.toml, ``backend = "pkg.mod:name"``)."""
    issues = load_known_issues(path)
    return {t: {f"{c}/{d}": i.reason for i in issues if i.backend == t
                for c in i.cases for d in i.dtypes} for t in targets}


def _in_background(fn, *args) -> Future:
    """``fn(*args)`` in a daemon thread: an error that ends the command (a case that does not
    build) need not wait for a compile to finish."""
    future = Future()

    def work():
        try:
            future.set_result(fn(*args))
        except BaseException as exc:
            future.set_exception(exc)
    threading.Thread(target=work, name="warm-up", daemon=True).start()
    return future


def _load(names) -> tuple[list, list[dict]]:
    """The backends that load, and a row for each that does not (skipped: unavailable here;
    error: a broken plugin, which does not end the run)."""
    ready, rows = [], []
    for name in names:
        try:
            ready.append(get_backend(name))
        except KeyError:  # an unknown name: refused before, said as the option
            raise
        except Exception as exc:
            status, reason = load_failure(exc)
            rows.append({"backend": name, "case": "*", "dtype": "*", "device": "-",
                         "status": status, "reason": reason})
    return ready, rows


def _run(run, names, ready, failed, warming, cases, dtypes, jobs, preps, bar, explain=(),
         inherit=None, slow=None, decoders=()):
    """The rows of one compare run into the open folder ``run``; (all rows, rows kept).
    ``warming``: backend name -> the future of its warm-up; until it is done, that backend's
    rows wait in ``deferred`` while the others' run. ``explain``: the ``--function`` backends,
    whose failing rows keep what their samples say of the common faults; ``slow``
    (``compare.slow``): their cases run cheapest first, those predicted too slow skipped."""
    # skipped rows are redone every run (the backend may be available now), failures that
    # may be transient are run again; everything else is kept as it was.
    kept = run.keep_rows(lambda r: r.get("status") not in (Status.SKIPPED, *TRANSIENT))
    done = {tuple(r.get(k) for k in KEY) for r in kept}
    if slow is not None and explain:
        jobs = cheapest_first(jobs, preps)  # the short cases' times predict the long ones'
        for r in kept:
            if (r.get("case"), r.get("dtype")) in preps:
                slow.seen(r.get("backend"), preps[r.get("case"), r.get("dtype")], r)
    ref = None
    try:
        ref = get_backend(REFERENCE)
    except Exception:  # rows will say the reference failed
        pass
    run.write_meta({"driver": "compare", "backends": names, "reference": REFERENCE,
                    "cases": [c.name for c in cases], "dtypes": list(dtypes or []),
                    "tolerances": {f"{case.name}/{dtype}": _tolerance(case, dtype)
                                   for case, dtype in jobs},
                    "backend_versions": backend_versions(ready), "resumed_rows": len(kept),
                    **dict(decoders)})  # the decoder stage's selection, before its rows
    rows = list(failed)
    for row in rows:
        run.log.append(row)
    bar.stage("compare", total=len(jobs) * len(ready), unit="runs")
    deferred, waiting = [], Counter()  # (backend, prep) rows; rows still to come per prep
    announced = set()

    def announce():
        for name, future in warming.items():
            if future.done() and name not in announced:
                announced.add(name)
                notes, seconds = future.result()
                if seconds >= WARM_UP_SAID:
                    for note in notes or [f"{name}: warmed up in {seconds:.0f} s"]:
                        bar.say(note if note.startswith(f"{name}:") else f"{name}: {note}")

    def row_of(backend, prep):
        row = slow.skip(backend, prep) if slow is not None else None
        if row is None:
            row = (check_function if backend.name in explain else check)(backend, prep, ref)
            if inherit is not None:  # what it owes its framework (compare.inherited)
                row = inherit(row, backend, prep, function=backend.name in explain)
            if slow is not None:
                slow.seen(backend, prep, row)
        run.log.append(row)
        rows.append(row)
        bar.update()

    def drain(wait: bool):
        for backend, prep in list(deferred):
            if wait or warming[backend.name].done():
                if not warming[backend.name].done():
                    bar.note(f"waiting for {backend.name} to warm up (its first run)")
                    warming[backend.name].result()
                    bar.note("")
                announce()
                deferred.remove((backend, prep))
                row_of(backend, prep)
                waiting[id(prep)] -= 1
                if not waiting[id(prep)]:
                    prep.reference = None

    for case, dtype in jobs:
        prep = preps[case.name, dtype]
        if "error" in case.expect:  # one row: the API itself must refuse the input
            if (API, case.name, dtype, "-") not in done:
                row = check_error(case, dtype, prep.variants[0].raw)
                run.log.append(row)
                rows.append(row)
            bar.update(len(ready))
            continue
        announce()
        for backend in ready:
            if (backend.name, case.name, dtype, backend.traits.device) in done:
                bar.update()
            elif not warming[backend.name].done():
                deferred.append((backend, prep))
                waiting[id(prep)] += 1
            else:
                row_of(backend, prep)
        if not waiting[id(prep)]:
            prep.reference = None  # the reference's tables can be large; done with this case
        drain(wait=False)
    drain(wait=True)
    return tidy(kept + rows), kept


def _tolerance(case, dtype: str) -> dict:
    """The tolerance a (case, dtype) is checked with, as the report shows it."""
    tol = case.tolerance(dtype)
    return {"loss_atol": tol.loss_atol, "loss_rtol": tol.loss_rtol, "grad_atol": tol.grad_atol}


def _warm_up(backend) -> tuple[list[str], float]:
    """One tiny run first, so one-off start-up costs (lazy imports, kernels) stay out of
    time_s; returns its notes and seconds. A backend with the trait ``compile_ahead`` (numba)
    compiles in a child process first, which leaves this process's lock on Python to the other
    rows; its note then stands for the warm-up's."""
    from ctcbench.core.problem import CTCProblem
    problem = CTCProblem(np.zeros((2, 1, 3), np.float32), [[1]], [2], [1])
    start = time.perf_counter()
    ahead = backend.traits.compile_ahead
    try:
        said = ahead() if ahead is not None and not backend.isolated else None
        notes = list(backend.run(problem).notes)
    except Exception:  # the real rows will report whatever is wrong
        said, notes = None, []
    return ([said] if said else notes), time.perf_counter() - start
