"""Per-row checks of the ``compare`` driver: one backend on one (case, dtype), every variant.

Each row is checked twice:
  * against the case's known answer (an independent oracle or a published value), mapped to
    every variant of an invariance case (a permuted blank, extra NaN frames, an upstream
    gradient ...), so a variant that breaks the invariance fails against the same oracle;
  * against the ``numpy`` reference run on the very same problem (gradient at the logits
    level; torch's log-prob-level convention is not a difference there, see
    docs/backends-and-plugins.md, "torch's gradient trap").
Status: ``ok``; ``mismatch`` (a check failed: the reason says which, by how much, where);
``error`` (the backend raised); ``crashed`` / ``timeout`` (an isolated backend's worker
process died, e.g. of SIGSEGV, or hung; it is restarted and the run goes on); ``known`` (a
failure listed in ``cases/known_issues.toml`` for a built-in backend, or in a plugin's
``known_issues``: an upstream bug recorded with its numbers that does not fail the gate);
``unsupported`` (``UnsupportedProblem``, a dtype the backend does not list, or an upstream
gradient its ``run`` does not take); ``skipped`` (the backend cannot run here, with its reason).
"""
from __future__ import annotations

import fnmatch
import time
from dataclasses import dataclass

import numpy as np

from ctcbench.caselib.builders import Variant, to_problem, variants
from ctcbench.caselib.judge import Checks, loss_error, worst
from ctcbench.caselib.library import Case
from ctcbench.caselib.expected import Answer, known_answer
from ctcbench.caselib.known import known_issue
from ctcbench.compare.baseline import fingerprint
from ctcbench.compare import extra
from ctcbench.runtime.protocol import BackendFailure, UnsupportedProblem, run_takes
from ctcbench.runtime.registry import REFERENCE
from ctcbench.runtime.status import FAILING, Status

# the sample whose loss is furthest out of tolerance: its index in the batch, the variant
# it is in ("base" for the case as written), its loss, the loss wanted and their difference
SAMPLE_COLUMNS = ("sample", "sample_variant", "sample_loss", "sample_expected", "sample_err")
COLUMNS = ("status", "backend", "case", "dtype", "device", "loss", "expected_loss", "abs_err",
           "rel_err", "grad_err", "grad_source", "ref_loss_err", "ref_grad_err", "finite",
           "margin", "time_s", "family", "oracle", "variants", "compute_dtype", "reason",
           "cause",  # cause: the faults a --function row's samples show (compare.causes)
           *SAMPLE_COLUMNS)  # the worst sample's figures, where loss is the batch's sum


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
    if "error" in case.expect:  # the API must refuse it: nothing to run (extra.check_error)
        return Prepared(case, dtype, vs, [], [])
    problems = [to_problem(v.raw, dtype) for v in vs]
    start = time.perf_counter()
    base = known_answer(problems[0], case.expect, case=case.name)
    answers = [Answer(base.loss, None if base.grad is None else v.grad_map(base.grad), base.source)
               for v in vs]
    prep = Prepared(case, dtype, vs, problems, answers)
    if base.result is not None and len(vs) == 1 and not vs[0].run_kwargs:
        # the oracle was the reference's own run on the one problem: the rows' reference
        prep.reference, prep.reference_time = [base.result], time.perf_counter() - start
    return prep


def prepare_all(cases: list[Case], dtypes=None, *, progress=None) -> dict:
    """``{(case name, dtype): Prepared}`` for every case in each of its dtypes (only
    ``dtypes`` when given): every problem built and checked before anything runs, so a bad
    case file fails fast, with an error naming the file, the case and the field.
    ``progress``: a ``ctcbench.progress.Progress`` counting the cases built."""
    preps = {}
    for case in cases:
        for dtype in case.dtypes:
            if dtypes is not None and dtype not in dtypes:
                continue
            try:
                preps[case.name, dtype] = prepare(case, dtype)
            except ValueError as exc:
                named = str(exc).startswith(f"case {case.name!r}")
                raise ValueError(f"{case.source}: {exc}" if named else
                                 f"{case.source}: case {case.name!r} ({dtype}): {exc}") from None
            except Exception as exc:
                raise ValueError(f"{case.source}: case {case.name!r} ({dtype}): expected a "
                                 f"buildable case, got {type(exc).__name__}: {exc}") from None
        if progress is not None:
            progress.update()
    return preps


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


def known_claim(backend, case: str, dtype: str) -> tuple[str, str, bool] | None:
    """The first known issue claiming (case, dtype) for ``backend``, from the known-issues
    table of the library (built-in backends, by name), then the backend's own
    ``known_issues`` (plugins): ``(why, the entry as its globs, whether it names the case
    itself rather than a pattern)``, or None."""
    issue = known_issue(backend.name, case, dtype)
    if issue is not None:
        return (issue.reason, f"cases {','.join(issue.cases)}, dtypes {','.join(issue.dtypes)}",
                case in issue.cases)
    for pattern, why in backend.traits.known_issues.items():
        if fnmatch.fnmatchcase(f"{case}/{dtype}", pattern):
            return why, pattern, not any(c in pattern.rsplit("/", 1)[0] for c in "*?[")
    return None


def known_reason(backend, case: str, dtype: str) -> str | None:
    """Why ``backend`` is known to fail on (case, dtype) (:func:`known_claim`), or None."""
    claim = known_claim(backend, case, dtype)
    return None if claim is None else claim[0]


def check(backend, prep: Prepared, ref, *, on_results=None) -> dict:
    """Run ``backend`` on every variant of a prepared case and fill one row; a failure that is
    a known issue (:func:`known_reason`) becomes status ``known``, its numbers kept.
    ``on_results``: called with the backend's results (one per variant) once it has run."""
    row = _check(backend, prep, ref, on_results)
    if row["status"] in FAILING:
        why = known_reason(backend, row["case"], row["dtype"])
        if why is not None:
            return {**row, "status": Status.KNOWN,
                    "reason": f"known {row['status']}: {why} | {row.get('reason') or ''}"}
    return row


def _check(backend, prep: Prepared, ref, on_results=None) -> dict:
    case, tol = prep.case, prep.case.tolerance(prep.dtype)
    row = {"backend": backend.name, "case": case.name, "family": case.family,
           "dtype": prep.dtype, "device": backend.traits.device,
           "oracle": prep.answers[0].source, "variants": len(prep.variants)}
    dtypes = backend.traits.dtypes
    if dtypes is not None and prep.dtype not in dtypes:
        return {**row, "status": Status.UNSUPPORTED,
                "reason": f"{backend.name} computes in {'/'.join(dtypes)}, not {prep.dtype}"}
    needs = sorted({k for v in prep.variants for k in v.run_kwargs})
    missing = [k for k in needs if not run_takes(backend.impl, k)]
    if missing:
        return {**row, "status": Status.UNSUPPORTED,
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
        return {**row, "status": Status.UNSUPPORTED, "reason": str(exc)}
    except BackendFailure as exc:  # the worker died or hung; it restarts on the next case
        return {**row, "status": exc.status, "reason": str(exc)}
    except Exception as exc:
        return {**row, "status": Status.ERROR, "reason": f"{type(exc).__name__}: {exc}"}
    if on_results is not None:
        on_results(results)

    checks = Checks(tol)
    sel = extra.sample_mask(case.expect, len(results[0].loss))  # (N,) the checked samples
    worst_sample = None
    for i, (v, res, ans) in enumerate(zip(prep.variants, results, prep.answers)):
        worst_sample = _worse_sample(worst_sample, v.label, res.loss, ans.loss, sel, tol)
        err, rel = checks.loss(res.loss[sel], ans.loss[sel], v.label, ans.source)
        checks.abs_err, checks.rel_err = worst(checks.abs_err, err), worst(checks.rel_err, rel)
        if ans.grad is not None:
            checks.grad_err = worst(checks.grad_err, checks.grad(
                res.grad_logits[:, sel], ans.grad[:, sel], v.label, ans.source))
        if refs is not None:
            checks.ref_loss_err = worst(checks.ref_loss_err, checks.loss(
                res.loss[sel], refs[i].loss[sel], v.label, REFERENCE)[0])
            rg = checks.grad(res.grad_logits[:, sel], refs[i].grad_logits[:, sel], v.label,
                             REFERENCE)
            checks.ref_grad_err = worst(checks.ref_grad_err, rg)
    try:
        extra.check_invariants(checks, prep, results)
        extra.check_deterministic(checks, backend, prep, results[0], prep.variants[0].run_kwargs)
        extra.check_reduction(checks, backend, prep, results[0], refs[0] if refs else None)
        extra.check_finite_difference(checks, backend, prep, results[0])
    except BackendFailure as exc:
        return {**row, "status": exc.status, "reason": str(exc)}
    except Exception as exc:
        checks.fail(f"format-2 check raised {type(exc).__name__}: {exc}")
    base, want = results[0].loss[sel], prep.answers[0].loss[sel]
    # finite: no NaN anywhere, and a finite loss wherever the known answer is finite
    finite = all(not np.isnan(r.loss[sel]).any() and np.isfinite(r.grad_logits[:, sel]).all()
                 and np.isfinite(r.loss[sel][np.isfinite(a.loss[sel])]).all()
                 for r, a in zip(results, prep.answers))
    if case.ordering:
        names = prep.variants[0].raw.names
        order = [names.index(s) for s in case.ordering]
        got = [results[0].loss[i] for i in order]
        if not all(a < b for a, b in zip(got, got[1:])):
            checks.fail("ordering " + " < ".join(case.ordering) + " violated: "
                         + ", ".join(f"{s}={x:.4g}" for s, x in zip(case.ordering, got)))
    if refs is None:
        checks.fail(f"reference {REFERENCE} failed: {prep.reference_error}")
    return {**row,
            "status": Status.MISMATCH if checks.failures else Status.OK,
            "loss": float(base.sum()), "expected_loss": float(want.sum()),
            "abs_err": checks.abs_err, "rel_err": checks.rel_err,
            # no oracle gradient (uniform, a published loss only): ref_grad_err is the check
            "grad_err": checks.grad_err if prep.answers[0].grad is not None else None,
            "grad_source": prep.answers[0].source if prep.answers[0].grad is not None else None,
            "ref_loss_err": checks.ref_loss_err if refs is not None else None,
            "ref_grad_err": checks.ref_grad_err if refs is not None else None,
            "finite": bool(finite), "margin": checks.margin, "time_s": elapsed,
            "compute_dtype": results[0].compute_dtype,
            "fingerprint": fingerprint(prep.problems, results),  # for --save-baseline
            **(dict(zip(SAMPLE_COLUMNS, worst_sample[1:])) if worst_sample else {}),
            "reason": "; ".join(checks.failures[:3]) + (" ..." if len(checks.failures) > 3 else "")}


def _worse_sample(found, label: str, got, want, sel, tol):
    """``found`` or the worst checked sample of this variant, whichever is further out of
    tolerance: ``(how far, index, label, loss, wanted, error)``; a NaN error is the worst."""
    err = loss_error(np.asarray(got, np.float64), np.asarray(want, np.float64))  # (N,)
    allowed = tol.loss_atol + tol.loss_rtol * np.where(np.isfinite(want), np.abs(want), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        far = np.where(np.isnan(err), np.inf, np.where(err == 0, 0.0, err / allowed))
    for n in np.flatnonzero(sel):
        rank = (bool(np.isnan(err[n])), float(far[n]))
        if found is None or rank > found[0]:
            found = (rank, int(n), label, float(got[n]), float(want[n]), float(err[n]))
    return found
