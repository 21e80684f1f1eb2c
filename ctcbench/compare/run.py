"""The ``compare`` driver: every backend x case x dtype, checked for loss and gradient.

Each row is checked twice:
  * against the case's known answer (an independent oracle or a published value), mapped to
    every variant of an invariance case (a permuted blank, extra NaN frames, an upstream
    gradient ...), so a variant that breaks the invariance fails against the same oracle;
  * against the ``numpy`` reference run on the very same problem (gradient at the logits
    level; torch's log-prob-level convention is not a difference there, see DESIGN.md).
Status: ``ok``; ``mismatch`` (a check failed: the reason says which, by how much, where);
``error`` (the backend raised); ``crashed`` / ``timeout`` (an isolated backend's worker
process died, e.g. of SIGSEGV, or hung; it is restarted and the run goes on); ``known`` (a
failure the backend lists in its ``known_issues``, ``{"case-glob/dtype-glob": why}``: an
upstream bug that is recorded with its numbers but does not fail the gate); ``unsupported`` (``UnsupportedProblem``, a dtype the backend
does not list, or an upstream gradient its ``run`` does not take); ``skipped`` (the backend
cannot run here, with its reason). Rows go to ``rows.jsonl`` in the run folder as they are
finished, so ``resume`` can pick up an interrupted run.
"""
from __future__ import annotations

import fnmatch
import importlib.metadata
import math
import time
import types
from dataclasses import dataclass

import numpy as np
import pandas as pd

from ctcbench.caselib.builders import Variant, to_problem, variants
from ctcbench.caselib.library import Case, load_cases, select_cases
from ctcbench.caselib.expected import Answer, known_answer
from ctcbench.core.problem import FLOAT_DTYPES
from ctcbench.progress import Progress
from ctcbench.protocol import run_takes
from ctcbench.registry import (
    BackendFailure,
    BackendUnavailable,
    UnsupportedProblem,
    backend_names,
    get_backend,
)
from ctcbench.runstore import RowLog, new_run_dir, to_json, write_meta

REFERENCE = "numpy"
STATUS_ORDER = ("mismatch", "crashed", "timeout", "error", "known", "unsupported", "skipped",
                "ok")  # failures first
FAILING = ("mismatch", "crashed", "timeout", "error")
CHECKED = FAILING + ("known", "ok")  # rows where a backend really ran on a case
RERUN = ("error", "crashed", "timeout")  # may be transient: ``resume`` runs them again
KEY = ("backend", "case", "dtype", "device")
COLUMNS = ("status", "backend", "case", "dtype", "device", "loss", "expected_loss", "abs_err",
           "rel_err", "grad_err", "grad_source", "ref_loss_err", "ref_grad_err", "finite",
           "margin", "time_s", "family", "oracle", "variants", "compute_dtype", "reason")
NUMBERS = ("loss", "expected_loss", "abs_err", "rel_err", "grad_err", "ref_loss_err",
           "ref_grad_err", "margin", "time_s")  # None: not applicable; NaN: a NaN result


@dataclass
class Prepared:
    """One (case, dtype): its problems, their known answers and the reference's results."""

    case: Case
    dtype: str
    variants: list[Variant]
    problems: list  # CTCProblem per variant
    answers: list[Answer]  # per variant, mapped from the base answer
    reference: list | None = None  # BackendResult per variant, filled on first use
    reference_time: float = 0.0
    reference_error: str | None = None


def prepare(case: Case, dtype: str) -> Prepared:
    """Build every variant of ``case`` in ``dtype`` and its known answer."""
    vs = variants(case.build, case.variants, case=case.name)
    problems = [to_problem(v.raw, dtype) for v in vs]
    base = known_answer(problems[0], case.expect, case=case.name)
    answers = [Answer(base.loss, None if base.grad is None else v.grad_map(base.grad), base.source)
               for v in vs]
    return Prepared(case, dtype, vs, problems, answers)


def _reference(prep: Prepared, ref) -> list | None:
    if prep.reference is None and prep.reference_error is None:
        start = time.perf_counter()
        try:
            prep.reference = [ref.run(p, **v.run_kwargs)
                              for v, p in zip(prep.variants, prep.problems)]
        except Exception as exc:  # the reference must not hide the backend's own result
            prep.reference_error = f"{type(exc).__name__}: {exc}"
        prep.reference_time = time.perf_counter() - start
    return prep.reference


def _loss_err(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """``(N,)`` |got - want|, 0 where both are the same infinity, NaN where got is NaN."""
    same_inf = np.isinf(got) & np.isinf(want) & (np.sign(got) == np.sign(want))
    with np.errstate(invalid="ignore"):
        return np.where(same_inf, 0.0, np.abs(got - want))


def _max(x) -> float:
    x = np.asarray(x, dtype=np.float64)
    if x.size == 0:
        return 0.0
    return float("nan") if np.isnan(x).any() else float(x.max())


def _worst(a: float, b: float) -> float:
    """max that keeps NaN (a NaN error is the worst kind)."""
    return a if math.isnan(a) else b if math.isnan(b) else max(a, b)


class _Checks:
    """Collects the worst error of each kind and a reason for each failed check."""

    def __init__(self, tol):
        self.tol = tol
        self.abs_err = self.rel_err = self.grad_err = self.ref_loss_err = self.ref_grad_err = 0.0
        self.margin = 0.0  # worst error / allowed error over every check; > 1 fails
        self.failures: list[str] = []

    def _fail(self, what: str) -> None:
        if what not in self.failures:
            self.failures.append(what)

    def loss(self, got, want, label: str, against: str) -> tuple[float, float]:
        """Worst absolute and relative loss error; records a failure beyond tolerance."""
        err = _loss_err(got, want)
        with np.errstate(invalid="ignore", divide="ignore"):
            rel = np.where(np.isfinite(want) & (want != 0), err / np.abs(want), err)
        allowed = self.tol.loss_atol + self.tol.loss_rtol * np.where(np.isfinite(want),
                                                                     np.abs(want), 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.margin = _worst(self.margin, _max(np.where(err == 0, 0.0, err / allowed)))
        bad = [n for n in range(len(want)) if not self.tol.loss_ok(err[n], want[n])]
        if bad:
            n = bad[0]
            self._fail(f"loss vs {against} [{label}] sample {n}: got {got[n]:.7g}, "
                       f"want {want[n]:.7g}")
        return _max(err), _max(rel)

    def grad(self, got, want, label: str, against: str) -> float:
        with np.errstate(invalid="ignore"):
            diff = np.abs(got - want)  # (T, N, C)
        err = _max(diff)
        with np.errstate(invalid="ignore", divide="ignore"):
            self.margin = _worst(self.margin, 0.0 if err == 0 else err / self.tol.grad_atol)
        if not err <= self.tol.grad_atol:  # NaN fails too
            t, n, c = np.unravel_index(np.nanargmax(np.where(np.isnan(diff), np.inf, diff)),
                                       diff.shape)
            self._fail(f"grad vs {against} [{label}] max err {err:.2g} > {self.tol.grad_atol:g} "
                       f"at t={t} n={n} c={c}")
        return err


def check(backend, prep: Prepared, ref) -> dict:
    """Run ``backend`` on every variant of a prepared case and fill one row; a failure the
    backend declares in ``known_issues`` becomes status ``known``, its numbers kept."""
    row = _check(backend, prep, ref)
    if row["status"] in FAILING:
        key = f"{row['case']}/{row['dtype']}"
        for pattern, why in backend.traits.known_issues.items():
            if fnmatch.fnmatchcase(key, pattern):
                return {**row, "status": "known",
                        "reason": f"known {row['status']}: {why} | {row.get('reason') or ''}"}
    return row


def _check(backend, prep: Prepared, ref) -> dict:
    case, tol = prep.case, prep.case.tolerance(prep.dtype)
    row = {"backend": backend.name, "case": case.name, "family": case.family,
           "dtype": prep.dtype, "device": backend.traits.device,
           "oracle": prep.answers[0].source, "variants": len(prep.variants)}
    dtypes = backend.traits.dtypes
    if dtypes is not None and prep.dtype not in dtypes:
        return {**row, "status": "unsupported",
                "reason": f"{backend.name} computes in {'/'.join(dtypes)}, not {prep.dtype}"}
    needs = sorted({k for v in prep.variants for k in v.run_kwargs})
    missing = [k for k in needs if not run_takes(backend.impl, k)]
    if missing:
        return {**row, "status": "unsupported",
                "reason": f"run() takes no {', '.join(missing)} (upstream gradient)"}

    is_reference = backend.name == REFERENCE
    refs = _reference(prep, ref) if ref is not None else None
    results, elapsed = [], 0.0
    try:
        if is_reference and refs is not None:  # the reference's own row: same run, same timing
            results, elapsed = refs, prep.reference_time
        else:
            for v, problem in zip(prep.variants, prep.problems):
                start = time.perf_counter()
                results.append(backend.run(problem, **v.run_kwargs))
                elapsed += time.perf_counter() - start
    except UnsupportedProblem as exc:
        return {**row, "status": "unsupported", "reason": str(exc)}
    except BackendFailure as exc:  # the worker died or hung; it restarts on the next case
        return {**row, "status": exc.status, "reason": str(exc)}
    except Exception as exc:
        return {**row, "status": "error", "reason": f"{type(exc).__name__}: {exc}"}

    checks = _Checks(tol)
    for i, (v, res, ans) in enumerate(zip(prep.variants, results, prep.answers)):
        err, rel = checks.loss(res.loss, ans.loss, v.label, ans.source)
        checks.abs_err, checks.rel_err = _worst(checks.abs_err, err), _worst(checks.rel_err, rel)
        if ans.grad is not None:
            checks.grad_err = _worst(checks.grad_err, checks.grad(res.grad_logits, ans.grad,
                                                                  v.label, ans.source))
        if refs is not None:
            checks.ref_loss_err = _worst(checks.ref_loss_err,
                                         checks.loss(res.loss, refs[i].loss, v.label, REFERENCE)[0])
            rg = checks.grad(res.grad_logits, refs[i].grad_logits, v.label, REFERENCE)
            checks.ref_grad_err = _worst(checks.ref_grad_err, rg)
    base, want = results[0].loss, prep.answers[0].loss
    # finite: no NaN anywhere, and a finite loss wherever the known answer is finite
    finite = all(not np.isnan(r.loss).any() and np.isfinite(r.grad_logits).all()
                 and np.isfinite(r.loss[np.isfinite(a.loss)]).all()
                 for r, a in zip(results, prep.answers))
    if case.ordering:
        names = prep.variants[0].raw.names
        order = [names.index(s) for s in case.ordering]
        got = [base[i] for i in order]
        if not all(a < b for a, b in zip(got, got[1:])):
            checks._fail("ordering " + " < ".join(case.ordering) + " violated: "
                         + ", ".join(f"{s}={x:.4g}" for s, x in zip(case.ordering, got)))
    if refs is None:
        checks._fail(f"reference {REFERENCE} failed: {prep.reference_error}")
    return {**row,
            "status": "mismatch" if checks.failures else "ok",
            "loss": float(base.sum()), "expected_loss": float(want.sum()),
            "abs_err": checks.abs_err, "rel_err": checks.rel_err,
            # no oracle gradient (uniform, a published loss only): ref_grad_err is the check
            "grad_err": checks.grad_err if prep.answers[0].grad is not None else None,
            "grad_source": prep.answers[0].source if prep.answers[0].grad is not None else None,
            "ref_loss_err": checks.ref_loss_err if refs is not None else None,
            "ref_grad_err": checks.ref_grad_err if refs is not None else None,
            "finite": bool(finite), "margin": checks.margin, "time_s": elapsed,
            "compute_dtype": results[0].compute_dtype,
            "reason": "; ".join(checks.failures[:3]) + (" ..." if len(checks.failures) > 3 else "")}


def _versions(backends) -> dict:
    """Versions of each backend's libraries: the package holding its implementation, the
    modules it holds on to (e.g. ``self.torch``) and any names in its ``packages`` attribute."""
    dists = importlib.metadata.packages_distributions()
    out = {}
    for b in backends:
        tops = {type(b.impl).__module__.split(".")[0]}
        tops |= {v.__name__.split(".")[0] for v in vars(b.impl).values()
                 if isinstance(v, types.ModuleType)} if hasattr(b.impl, "__dict__") else set()
        tops |= set(b.traits.packages)
        out[b.name] = {}
        for top in sorted(tops):
            for d in dists.get(top, [top]):
                try:
                    out[b.name][d] = importlib.metadata.version(d)
                except importlib.metadata.PackageNotFoundError:
                    pass
    return out


def compare(backends=None, cases=None, dtypes=None, *, case_dirs=None, out=None,
            resume: bool = False, progress: bool | None = None, plot: bool = False) -> pd.DataFrame:
    """Check backends on cases; one tidy row per (backend, case, dtype, device).

    Args:
      backends: backend names; default every registered backend (unavailable ones -> skipped).
      cases: ``Case`` objects, or name globs selecting from ``case_dirs`` (default the
        built-in library); default every case.
      dtypes: restrict to these dtypes; default each case's own list.
      out: run folder (default ``reports/compare-<UTC time>``); ``resume`` keeps the rows an
        earlier run left in it and does only the rest; rows that ended in ``error``,
        ``crashed`` or ``timeout`` may be transient and run again.
      progress: ``False`` for none; else a bar on a terminal, plain lines otherwise
        (ctcbench.progress).
      plot: also save ``margins.png``, a heat map of error / tolerance (see compare_plot).
    Returns:
      The rows, failures first; ``df.attrs["run_dir"]`` is where they were written.
    """
    bad = [d for d in dtypes or () if d not in FLOAT_DTYPES]
    if bad:
        raise ValueError(f"dtypes: expected names from {', '.join(FLOAT_DTYPES)}, got {bad}")
    if cases is None or all(isinstance(c, str) for c in cases):
        cases = select_cases(load_cases(case_dirs), cases or None)
    jobs = [(case, dtype) for case in cases for dtype in case.dtypes
            if dtypes is None or dtype in dtypes]
    preps = {}
    bar = Progress("compare (preparing cases)", total=len(jobs), unit="cases", enabled=progress,
                   leave=False)
    for case, dtype in jobs:  # every case builds before anything runs: a bad file fails fast
        try:
            preps[case.name, dtype] = prepare(case, dtype)
            bar.update()
        except Exception as exc:
            bar.close()
            raise ValueError(f"case {case.name!r} in {case.source} ({dtype}): expected a "
                             f"buildable case, got {type(exc).__name__}: {exc}") from None
    names = list(dict.fromkeys(backends)) if backends else backend_names()
    for name in names:
        if name not in backend_names():
            get_backend(name)  # raises KeyError listing the known names, before anything runs
    run_dir = new_run_dir("compare", out)
    log = RowLog(run_dir / "rows.jsonl")
    # skipped rows are redone every run (the backend may be available now), failures that
    # may be transient are run again; everything else is kept as it was.
    kept = ([r for r in log.rows(floats=NUMBERS) if r.get("status") not in ("skipped",) + RERUN]
            if resume else [])
    if not resume and log.path.exists():
        log.path.unlink()
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
    for row in rows:
        log.append(row)
    ref = None
    try:
        ref = get_backend(REFERENCE)
    except Exception:  # rows will say the reference failed
        pass
    for backend in ready:
        _warm_up(backend)
    write_meta(run_dir, {"driver": "compare", "backends": names, "reference": REFERENCE,
                         "cases": [c.name for c in cases], "dtypes": list(dtypes or []),
                         "backend_versions": _versions(ready), "resumed_rows": len(kept)})
    bar.stage("compare", total=len(jobs) * len(ready), unit="runs")
    for case, dtype in jobs:
        prep = preps[case.name, dtype]
        for backend in ready:
            device = backend.traits.device
            if (backend.name, case.name, dtype, device) not in done:
                row = check(backend, prep, ref)
                log.append(row)
                rows.append(row)
            bar.update()
        prep.reference = None  # the reference's tables can be large; done with this case
    bar.close()
    df = tidy(kept + rows)
    (run_dir / "rows.csv").write_text(to_csv(df))
    (run_dir / "rows.json").write_text(to_json(df_records(df), indent=1) + "\n")
    if plot and (df["case"] != "*").any():
        from ctcbench.compare.plot import plot_margins
        plot_margins(df, run_dir / "margins.png")
    from ctcbench.report import write_report
    write_report([run_dir])  # report.html: the run folder as one page
    df.attrs["run_dir"] = str(run_dir)
    return df


def _warm_up(backend) -> None:
    """One tiny run first, so one-off start-up costs (lazy imports, kernels) stay out of time_s."""
    from ctcbench.core.problem import CTCProblem
    problem = CTCProblem(np.zeros((2, 1, 3), np.float32), [[1]], [2], [1])
    try:
        backend.run(problem)
    except Exception:  # the real rows will report whatever is wrong
        pass


def tidy(rows: list[dict]) -> pd.DataFrame:
    """Rows as a DataFrame with every column, one row per key, failures first. Columns hold
    objects, so a value that does not apply (None) stays apart from a NaN result."""
    df = pd.DataFrame([{c: r.get(c) for c in COLUMNS} for r in rows], columns=list(COLUMNS),
                      dtype=object)
    df = df.drop_duplicates(subset=list(KEY), keep="last")
    rank = df["status"].map({s: i for i, s in enumerate(STATUS_ORDER)})
    df = df.assign(_rank=rank).sort_values(["_rank", "backend", "case", "dtype"], kind="stable")
    return df.drop(columns="_rank").reset_index(drop=True)


def df_records(df: pd.DataFrame) -> list[dict]:
    """JSON-ready rows: not applicable is None (null); ``to_json`` spells NaN and inf as the
    strings "nan" and "inf"."""
    return df.to_dict(orient="records")


def to_csv(df: pd.DataFrame) -> str:
    """The rows as CSV: not applicable is an empty field, a NaN result the word nan."""
    spelled = df.map(lambda v: "nan" if isinstance(v, float) and math.isnan(v) else v)
    return spelled.to_csv(index=False)


def summarize(df: pd.DataFrame) -> dict:
    """Counts per status and the failing rows; ``failed`` is what a CI gate checks: true on
    any failing row, and when no row was checked at all (``checked`` is 0)."""
    counts = {s: int((df["status"] == s).sum()) for s in STATUS_ORDER}
    failing = df[df["status"].isin(FAILING)]
    checked = int(df["status"].isin(CHECKED).sum())
    return {"failed": bool(len(failing)) or checked == 0, "checked": checked, "counts": counts,
            "failing": [f"{r.backend}/{r.case}/{r.dtype}" for r in failing.itertuples()],
            "failing_cases": sorted(set(failing["case"])),
            "run_dir": df.attrs.get("run_dir")}


def nothing_checked(summary: dict) -> str | None:
    """Why a run that checked no row cannot pass, or None when some row was checked."""
    if summary["checked"]:
        return None
    counts = ", ".join(f"{n} {k}" for k, n in summary["counts"].items() if n)
    return "nothing was checked: " + (f"no backend ran on any case ({counts})" if counts else
                                      "no case offers the selected dtypes")


def _fmt(x, spec: str) -> str:
    if x is None:  # does not apply
        return "-"
    if isinstance(x, float) and math.isnan(x):
        return "nan"
    return format(x, spec)


def format_table(df: pd.DataFrame, *, reason_width: int = 70) -> str:
    """A compact table for people, failures first, and a one-line summary at the end."""
    cols = [("status", "status", "s"), ("backend", "backend", "s"), ("case", "case", "s"),
            ("dtype", "dtype", "s"), ("device", "dev", "s"), ("loss", "loss", ".6g"),
            ("expected_loss", "expected", ".6g"), ("abs_err", "loss_err", ".1e"),
            ("grad_err", "grad_err", ".1e"), ("ref_grad_err", "ref_grad", ".1e"),
            ("time_s", "ms", ".1f"), ("reason", "reason", "s")]
    cells = []
    for r in df.to_dict(orient="records"):
        line = []
        for key, _, spec in cols:
            v = r.get(key)
            if key == "time_s" and v is not None and not (isinstance(v, float) and math.isnan(v)):
                v = v * 1e3
            text = _fmt(v, spec) if spec != "s" else ("" if v is None else str(v))
            if key == "reason" and len(text) > reason_width:
                text = text[: reason_width - 3] + "..."
            line.append(text)
        cells.append(line)
    heads = [h for _, h, _ in cols]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(heads)]
    right = {"loss", "expected", "loss_err", "grad_err", "ref_grad", "ms"}

    def fmt_line(items):
        return "  ".join((s.rjust(w) if h in right else s.ljust(w))
                         for s, w, h in zip(items, widths, heads)).rstrip()
    lines = [fmt_line(heads)] + [fmt_line(c) for c in cells]
    s = summarize(df)
    counts = ", ".join(f"{n} {k}" for k, n in s["counts"].items() if n)
    verdict = "FAILED" if s["failed"] else "passed"
    tail = f"compare {verdict}: {counts or 'no rows'}"
    if nothing_checked(s):
        tail += f"; {nothing_checked(s)}"
    if s["failing_cases"]:
        tail += f"; failing cases: {', '.join(s['failing_cases'])}"
    if s["run_dir"]:
        tail += f"; results in {s['run_dir']}"
    return "\n".join(lines + [tail])
