"""``ctcbench fuzz``: property-based differential testing of one backend against a reference.

Hypothesis draws problems (:mod:`ctcbench.fuzz.problems`), the backend and the reference run on
each, and :func:`ctcbench.fuzz.judge.judge` says what is wrong, if anything. On the first
failure hypothesis shrinks the problem to a minimal one, which is written as a case file into
``<run>/cases/``; ``ctcbench compare --cases <run>/cases --backend NAME`` reproduces it. The
hypothesis database lives in ``<run>/hypothesis/``: a rerun on the same folder replays the
failures first. The budget bounds the search; shrinking a found problem takes what it takes
(seconds on small problems).
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

from ctcbench.cluster import check_executor
from ctcbench.errors import InputError, expect
from ctcbench.fuzz.campaign import campaign
from ctcbench.fuzz.config import DEFAULT_DTYPES, FUZZ_DTYPES, FuzzSettings
from ctcbench.fuzz.kind import KIND
from ctcbench.fuzz.search import fast_oracle, search, warm_up
from ctcbench.runs.store import RunResult, check_out, open_run
from ctcbench.runtime.protocol import BackendUnavailable
from ctcbench.runtime.registry import get_backend
from ctcbench.settings import from_options


def _dtypes(backend, wanted=None) -> tuple[str, ...]:
    supported = backend.traits.dtypes or FUZZ_DTYPES
    return tuple(d for d in wanted or DEFAULT_DTYPES if d in supported)


def fuzz(backend_name: str | None = None, *, out=None, resume: bool = False,
         progress: bool = True, decoder: str | None = None, aligner: str | None = None,
         score: str | None = None, **options) -> RunResult:
    """Search for a problem on which ``backend_name`` disagrees with ``against`` (or crashes, hangs
    or breaks a gradient invariant) for ``budget`` seconds; shrink the first one found.

    ``options``: the fields of :class:`ctcbench.fuzz.config.FuzzSettings`, each with its
    default and help there. ``dtypes``: draw only these (of ``FUZZ_DTYPES``; default
    float64 and float32), as far as the backend takes them; below float64 each is judged with
    the round-off bound of its arithmetic (``ctcbench.caselib.judge.problem_tolerance``).
    ``out``: run folder (default ``reports/fuzz-<UTC time>``); ``resume`` searches again in an
    existing one, replaying the failures its hypothesis database holds first. Returns a
    ``RunResult`` with one row per search made in the folder; ``summary`` holds this search:
    ``tried``, ``seconds``, ``found`` and, when found, ``what``, ``size``, ``dtype``, ``case_file``.

    ``executor="dask-local"`` (``jobs`` worker processes, default min(2, CPUs)) or a
    ``scheduler`` address: a campaign of ``jobs`` searches at once (default one per worker of
    the cluster), each on its own seed, one row each (:mod:`ctcbench.fuzz.campaign`); the
    summary is the campaign's, with the first find.

    ``decoder``: fuzz that decoder or aligner instead, judged by brute force
    (:mod:`ctcbench.fuzz.decoders`; ``budget`` and ``seed`` apply, here only); a
    ``"pkg.mod:name"`` is a user's decoder function, ``aligner`` an aligner function (or name),
    ``score`` what such a function's scores are where it does not say.
    """
    s = from_options(FuzzSettings, options, "fuzz()")
    if decoder is not None or aligner is not None:
        from ctcbench.fuzz.decoders import searched_name
        name = searched_name(decoder, aligner, score, progress)
        return _fuzz_decoder(name, s, out=out, resume=resume, progress=progress)
    against, budget, seed, dtypes = s.against, s.budget, s.seed, s.dtypes or None
    executor, scheduler, jobs = s.executor, s.scheduler, s.jobs
    check_executor(executor, scheduler)
    on_dask = scheduler is not None or executor == "dask-local"
    expect(on_dask or jobs in (None, 1), "--jobs",
           "1 with --executor local (several searches at once: --executor dask-local or "
           "--scheduler)", jobs)
    if executor == "dask-local" and jobs is None:
        jobs = min(2, os.cpu_count() or 1)
    check_out(KIND, out, resume=resume)
    backend, reference = _loaded(backend_name, "--backend"), _loaded(against, "--against")
    fast = fast_oracle(backend_name, against)
    asked, dtypes = dtypes or DEFAULT_DTYPES, _dtypes(backend, dtypes)
    if not dtypes:
        raise ValueError(f"--dtype: expected a dtype {backend_name!r} computes in "
                         f"({', '.join(backend.traits.dtypes)}), got {', '.join(asked)}")
    with open_run(KIND, out, resume=resume) as run:
        if not resume:
            run.write_meta({"backend": backend_name, "against": against, "dtypes": list(dtypes)})
        kept = len(run.rows())
        if on_dask:
            summary = campaign(run, backend_name, against, dtypes, budget=budget, seed=seed,
                               scheduler=scheduler, jobs=jobs)
        else:
            for b in (backend, reference) + ((fast,) if fast is not None else ()):
                warm_up(b, dtypes)  # imports and compilation are not charged to the budget
            summary = search(backend, reference, dtypes, budget=budget, seed=seed,
                              run_dir=Path(run.run_dir), progress=progress, fast=fast)
            run.log.append({"search": kept + 1, **summary, "seed": seed, "budget_s": budget})
        rows = pd.DataFrame(run.rows())
    files = [Path(summary["case_file"])] if summary["found"] else []
    return RunResult(run.run_dir, rows, summary, run.environment, resumed=kept, files=files)


def _fuzz_decoder(name: str, s: FuzzSettings, *, out, resume, progress) -> RunResult:
    from ctcbench.fuzz.decoders import fuzz_decoder
    from ctcbench.runtime.decoders import check_decoder_names
    check_decoder_names([name], "--decoder")
    expect(s.executor == "local" and s.scheduler is None and s.jobs in (None, 1), "--decoder",
           "a search here (--executor local)", f"--executor {s.executor}")
    expect(s.against == FuzzSettings.against and not s.dtypes, "--decoder",
           "no --against or --dtype (a decoder is judged by brute force, in its own dtype)",
           "--against" if s.against != FuzzSettings.against else "--dtype")
    check_out(KIND, out, resume=resume)
    with open_run(KIND, out, resume=resume) as run:
        if not resume:
            run.write_meta({"decoder": name, "against": "brute force"})
        kept = len(run.rows())
        summary = fuzz_decoder(name, budget=s.budget, seed=s.seed, run_dir=Path(run.run_dir),
                               progress=progress)
        run.log.append({"search": kept + 1, **summary, "seed": s.seed, "budget_s": s.budget})
        rows = pd.DataFrame(run.rows())
    files = [Path(summary["case_file"])] if summary["found"] else []
    return RunResult(run.run_dir, rows, summary, run.environment, resumed=kept, files=files)


def _loaded(name: str, option: str):
    """The backend ``name``; one that cannot run here is an error naming ``option``."""
    try:
        return get_backend(name)
    except InputError as exc:  # an unknown name: said as the option that gave it
        raise type(exc)(option, exc.problem) from None
    except BackendUnavailable as exc:
        raise ValueError(f"{option}: {name!r} cannot run here: {exc}") from None


def summary_text(found: dict, backend_name: str, against: str, named: str | None = None) -> str:
    """A search's summary for people: what it tried and, when it found one, the problem, its
    case file and the command that reproduces it (``named``: the options naming the backend
    there, default ``--backend NAME``)."""
    lines = [f"fuzz {backend_name} against {against}: {found['tried']} problems in "
             f"{found['seconds']:.0f} s"]
    if not found["found"]:
        return "\n".join(lines + ["nothing found"])
    if "size" not in found:  # a decoder's find
        return "\n".join(lines + [
            f"FOUND: {found['what']}", f"case file: {found['case_file']}",
            f"reproduce: ctcbench compare --cases {Path(found['case_file']).parent} {named}"])
    size = found["size"]
    return "\n".join(lines + [
        f"FOUND: {found['what']}",
        f"smallest problem: T={size['T']} N={size['N']} C={size['C']} L={size['L']} "
        f"input_lengths={size['input_lengths']} blank={size['blank']} {found['dtype']}",
        f"case file: {found['case_file']}",
        f"reproduce: ctcbench compare --cases {Path(found['case_file']).parent} "
        f"{named or f'--backend {backend_name}'}"])
