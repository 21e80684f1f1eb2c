"""One decoder or aligner on one decoder case, as a row of compare's columns: run, timed and
judged (``ctcbench.caselib.decoder_judge``), a failure that ``cases/known_issues.toml`` lists
made ``known``. Shared by ``compare --decoder`` and ``fuzz --decoder``."""
from __future__ import annotations

import time

from ctcbench.caselib.decoder_cases import DecoderCase
from ctcbench.caselib.decoder_judge import (BRUTE_FORCE_PATHS, aligner_target, judge_aligner,
                                            judge_decoder)
from ctcbench.caselib.known import known_issue
from ctcbench.runtime.protocol import BackendCrashed, BackendTimeout, UnsupportedProblem
from ctcbench.runtime.status import FAILING, Status

SAID_FINDINGS = 3  # findings a row's reason spells out; the rest are counted


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
            return _aligned(decoder, case)
        log_probs, lengths = case.batch()
        beam = case.beam_width()
        start = time.perf_counter()
        hyps = decoder.decode(log_probs, lengths, blank=case.blank, beam=beam)
        seconds = time.perf_counter() - start
        findings = judge_decoder(traits, case, hyps, beam=beam)
    except (BackendCrashed, BackendTimeout) as exc:
        T = max(len(s) for s in case.samples)
        return decoder_row(decoder.name, case, exc.status, f"on {case.name} (T={T}, "
                           f"N={len(case.samples)}, C={case.C}): {exc}", traits)
    except UnsupportedProblem as exc:
        return decoder_row(decoder.name, case, Status.UNSUPPORTED, str(exc), traits)
    except Exception as exc:
        return decoder_row(decoder.name, case, Status.ERROR, f"{type(exc).__name__}: {exc}"[:600],
                           traits)
    return _judged(decoder, case, findings, seconds)


def _aligned(decoder, case: DecoderCase) -> dict:
    """An aligner's row: one call per sample, each outcome judged, a refusal included; a
    sample that kills the worker is said with its shape, and the others still run."""
    outcomes, crashed, seconds = [], [], 0.0
    for n, lp in enumerate(case.samples):
        target = aligner_target(case, n)
        start = time.perf_counter()
        try:
            outcomes.append(decoder.align(lp, target, blank=case.blank))
        except BackendCrashed as exc:
            outcomes.append(exc)
            crashed.append(f"sample {n} (T={len(lp)}, target {list(target)}, "
                           f"L={len(target)}): {exc}")
        except BackendTimeout as exc:
            return decoder_row(decoder.name, case, Status.TIMEOUT, f"sample {n} (T={len(lp)}, "
                               f"L={len(target)}): {exc}", decoder.traits)
        except UnsupportedProblem as exc:
            return decoder_row(decoder.name, case, Status.UNSUPPORTED, str(exc), decoder.traits)
        except Exception as exc:  # judged: a refusal of a target with no path is right
            if broke_contract(exc, decoder.name):  # it returned something else than a path
                raise
            outcomes.append(exc)
        seconds += time.perf_counter() - start  # the calls alone, not the judge
    if crashed:
        return decoder_row(decoder.name, case, Status.CRASHED, f"crashed on {case.name} "
                           + "; ".join(crashed)[:600], decoder.traits)
    findings = judge_aligner(decoder.traits, case, outcomes)
    if findings and all(f.check == "raised" for f in findings):
        return decoder_row(decoder.name, case, Status.ERROR, _said(findings), decoder.traits)
    return _judged(decoder, case, findings, seconds)


def broke_contract(exc: Exception, name: str) -> bool:
    """``exc`` is the contract's complaint about what the aligner returned (raised here by
    ``LoadedDecoder``), not something the aligner raised."""
    return isinstance(exc, TypeError) and str(exc).startswith(
        (f"aligner {name!r}: expected", f"decoder {name!r}: expected"))


def _judged(decoder, case, findings, seconds) -> dict:
    if not findings:
        return decoder_row(decoder.name, case, Status.OK, None, decoder.traits, seconds)
    return decoder_row(decoder.name, case, Status.MISMATCH, _said(findings), decoder.traits,
                       seconds)


def _said(findings) -> str:
    """The first findings spelled out, the rest counted."""
    said = "; ".join(str(f) for f in findings[:SAID_FINDINGS])
    more = len(findings) - SAID_FINDINGS
    return said + (f"; and {more} more" if more > 0 else "")


def decoder_row(name, case, status, reason, traits=None, seconds=None) -> dict:
    small = case != "*" and all(s.shape[1] ** s.shape[0] <= BRUTE_FORCE_PATHS
                                for s in case.samples)
    return {"backend": name, "case": case if case == "*" else case.name,
            "dtype": traits.dtype if traits else "*", "device": "cpu" if traits else "-",
            "status": status, "reason": reason, "time_s": seconds,
            "family": None if case == "*" else f"decoders/{case.family}",
            "oracle": None if case == "*" else ("brute force" if small else "reference")}


