"""``compare``'s decoder rows: every decoder and aligner on the decoder case library.

One row per (decoder, case), in compare's columns: ``status`` ok / mismatch (the judge's
findings, ``ctcbench.caselib.decoder_judge``, in ``reason``; ``known`` where
``cases/known_issues.toml`` lists it, as for losses) / error (it raised) / crashed /
timeout / skipped (unavailable here, with the install hint). ``dtype`` is what the decoder
computes in, ``oracle`` where the right answer came from.
"""
from __future__ import annotations

import fnmatch
import time

import numpy as np

from ctcbench.caselib.decoder_cases import DecoderCase
from ctcbench.caselib.known import known_issue
from ctcbench.caselib.decoder_judge import (BRUTE_FORCE_PATHS, aligner_target, judge_aligner,
                                            judge_decoder)
from ctcbench.errors import fail
from ctcbench.runtime.decoders import OWN_DECODERS, decoder_names, get_decoder
from ctcbench.runtime.protocol import BackendCrashed, BackendTimeout, BackendUnavailable
from ctcbench.runtime.status import FAILING, Status

ALL = "all"  # --decoder all: every registered decoder and aligner
SAID_FINDINGS = 3  # findings a row's reason spells out; the rest are counted


def default_decoders() -> list[str]:
    """What ``compare`` checks with no ``--decoder``: ctcbench's own decoders and aligner
    (a framework's decoder is asked for by name, or with ``all``)."""
    return list(OWN_DECODERS)


def expand(names) -> list[str]:
    """``--decoder`` values: names, or ``all``."""
    names = list(dict.fromkeys(names or ()))
    return decoder_names() if ALL in names else names


def select_decoder_cases(cases: list[DecoderCase], globs) -> list[DecoderCase]:
    """Cases matching any glob by ``name`` or ``decoders/family/name``; all without globs."""
    if not globs:
        return list(cases)
    return [c for c in cases if any(fnmatch.fnmatchcase(c.name, g)
                                    or fnmatch.fnmatchcase(f"decoders/{c.family}/{c.name}", g)
                                    or fnmatch.fnmatchcase(f"{c.family}/{c.name}", g)
                                    for g in globs)]


def no_decoder_case(globs, cases) -> None:
    fail("case", "a glob matching at least one decoder case, such as 'decoders/*' of the "
         f"families {', '.join(sorted({c.family for c in cases}))}", repr(list(globs)))


def decoder_rows(names, cases, *, append=lambda row: None, update=lambda: None,
                 done=frozenset(), versions=None) -> list[dict]:
    """The rows of ``names`` on ``cases``; each row goes to ``append`` as it is made.
    ``done``: (decoder, case) pairs an earlier run of the folder finished (``--resume``);
    ``versions``: a dict filled with each loaded decoder's {distribution: version}."""
    from ctcbench.runtime.registry import backend_versions
    rows = []
    for name in names:
        if all((name, c.name) in done for c in cases):
            update(len(cases))
            continue
        try:
            decoder = get_decoder(name)
        except BackendUnavailable as exc:
            row = _row(name, "*", Status.SKIPPED, str(exc))
            rows.append(row)
            append(row)
            update(len(cases))
            continue
        if versions is not None:
            versions.update(backend_versions([decoder]))  # its module's and its packages'
        _warm_up(decoder)
        try:
            for case in cases:
                if (name, case.name) in done:
                    update()
                    continue
                row = check_decoder_case(decoder, case)
                rows.append(row)
                append(row)
                update()
        finally:
            decoder.close()
    return rows


def _warm_up(decoder) -> None:
    """One tiny call first, so a worker's start and a framework's import stay out of time_s;
    the rows report whatever is wrong."""
    lp = np.log(np.full((2, 1, 3), 1 / 3))  # (T, N, C)
    try:
        if decoder.traits.role == "aligner":
            decoder.align(lp[:, 0], [1], blank=0)
        else:
            decoder.decode(lp, [2], blank=0, beam=1)
    except Exception:
        pass


def check_decoder_case(decoder, case: DecoderCase) -> dict:
    """One row: ``decoder`` (a ``LoadedDecoder``) on ``case``, judged; a failure that
    ``cases/known_issues.toml`` lists is ``known``, as for losses."""
    row = _checked(decoder, case)
    if row["status"] in FAILING:
        issue = known_issue(decoder.name, case.name, decoder.traits.dtype)
        if issue is not None:
            return {**row, "status": Status.KNOWN,
                    "reason": f"known {row['status']}: {issue.reason} | {row['reason']}"}
    return row


def _checked(decoder, case: DecoderCase) -> dict:
    traits = decoder.traits
    try:
        if traits.role == "aligner":
            targets = [aligner_target(case, n) for n in range(len(case.samples))]
            start = time.perf_counter()
            got = [decoder.align(lp, t, blank=case.blank) for lp, t in zip(case.samples, targets)]
            seconds = time.perf_counter() - start  # the call alone, not the judge
            findings = judge_aligner(traits, case, got)
        else:
            log_probs, lengths = case.batch()
            beam = case.beam_width()
            start = time.perf_counter()
            hyps = decoder.decode(log_probs, lengths, blank=case.blank, beam=beam)
            seconds = time.perf_counter() - start
            findings = judge_decoder(traits, case, hyps, beam=beam)
    except BackendCrashed as exc:
        return _row(decoder.name, case, Status.CRASHED, str(exc), traits)
    except BackendTimeout as exc:
        return _row(decoder.name, case, Status.TIMEOUT, str(exc), traits)
    except Exception as exc:
        return _row(decoder.name, case, Status.ERROR, f"{type(exc).__name__}: {exc}"[:600],
                    traits)
    if not findings:
        return _row(decoder.name, case, Status.OK, None, traits, seconds)
    said = "; ".join(str(f) for f in findings[:SAID_FINDINGS])
    more = len(findings) - SAID_FINDINGS
    said += f"; and {more} more" if more > 0 else ""
    return _row(decoder.name, case, Status.MISMATCH, said, traits, seconds)


def _row(name, case, status, reason, traits=None, seconds=None) -> dict:
    small = case != "*" and all(s.shape[1] ** s.shape[0] <= BRUTE_FORCE_PATHS
                                for s in case.samples)
    return {"backend": name, "case": case if case == "*" else case.name,
            "dtype": traits.dtype if traits else "*", "device": "cpu" if traits else "-",
            "status": status, "reason": reason, "time_s": seconds,
            "family": None if case == "*" else f"decoders/{case.family}",
            "oracle": None if case == "*" else ("brute force" if small else "reference")}


def stale_decoder_issues(rows, names) -> list[str]:
    """A passing decoder row a known issue claims: said, as for losses (``compare.stale``)."""
    out = []
    for r in rows:
        if r.get("backend") in names and r.get("status") == Status.OK:
            issue = known_issue(r["backend"], r["case"], r["dtype"])
            if issue is not None:
                out.append(f"{r['backend']}/{r['case']}/{r['dtype']}: listed as known "
                           f"({issue.reason}) but passes")
    return out
