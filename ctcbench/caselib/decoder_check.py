"""One decoder or aligner on one decoder case, as a row of compare's columns: run, timed and
judged (``ctcbench.caselib.decoder_judge``), a failure that ``cases/known_issues.toml`` lists
made ``known``. Shared by ``compare --decoder`` and ``fuzz --decoder``."""
from __future__ import annotations

import time

from ctcbench.caselib.decoder_cases import DecoderCase
from ctcbench.caselib.decoder_judge import (BRUTE_FORCE_PATHS, aligner_target, judge_aligner,
                                            judge_decoder)
from ctcbench.caselib.known import known_issue
from ctcbench.runtime.protocol import BackendCrashed, BackendTimeout
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
        return decoder_row(decoder.name, case, Status.CRASHED, str(exc), traits)
    except BackendTimeout as exc:
        return decoder_row(decoder.name, case, Status.TIMEOUT, str(exc), traits)
    except Exception as exc:
        return decoder_row(decoder.name, case, Status.ERROR, f"{type(exc).__name__}: {exc}"[:600],
                    traits)
    if not findings:
        return decoder_row(decoder.name, case, Status.OK, None, traits, seconds)
    said = "; ".join(str(f) for f in findings[:SAID_FINDINGS])
    more = len(findings) - SAID_FINDINGS
    said += f"; and {more} more" if more > 0 else ""
    return decoder_row(decoder.name, case, Status.MISMATCH, said, traits, seconds)


def decoder_row(name, case, status, reason, traits=None, seconds=None) -> dict:
    small = case != "*" and all(s.shape[1] ** s.shape[0] <= BRUTE_FORCE_PATHS
                                for s in case.samples)
    return {"backend": name, "case": case if case == "*" else case.name,
            "dtype": traits.dtype if traits else "*", "device": "cpu" if traits else "-",
            "status": status, "reason": reason, "time_s": seconds,
            "family": None if case == "*" else f"decoders/{case.family}",
            "oracle": None if case == "*" else ("brute force" if small else "reference")}


