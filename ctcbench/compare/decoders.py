"""``compare``'s decoder rows: every decoder and aligner on the decoder case library, a user's
own functions among them (``--decoder PKG.MOD:NAME``, ``--aligner PKG.MOD:NAME``).

One row per (decoder, case), in compare's columns: ``status`` ok / mismatch (the judge's
findings, ``ctcbench.caselib.decoder_judge``, in ``reason``; ``known`` where
``cases/known_issues.toml`` lists it, as for losses) / error (it raised) / crashed /
timeout / skipped (unavailable here, with the install hint). ``dtype`` is what the decoder
computes in, ``oracle`` where the right answer came from.
"""
from __future__ import annotations

import sys

import numpy as np

from ctcbench.caselib.decoder_check import check_decoder_case, decoder_row
from ctcbench.caselib.known import known_issue
from ctcbench.compare.kind import load_failure
from ctcbench.errors import fail
from ctcbench.runtime.decoders import OWN_DECODERS, get_decoder
from ctcbench.runtime.status import Status



def default_decoders() -> list[str]:
    """What ``compare`` checks with no ``--decoder``: ctcbench's own decoders and aligner
    (a framework's decoder is asked for by name, or with ``all``)."""
    return list(OWN_DECODERS)


def named_decoders(decoders, aligners=(), score: str | None = None,
                   progress: bool | None = None):
    """``--decoder`` and ``--aligner`` values as registered names: each ``PKG.MOD:NAME`` a
    user's function registered as a decoder or aligner (:mod:`ctcbench.runtime.decoder_functions`,
    probed in its worker), what was found said on stderr; ``score`` declares the scores of the
    functions that do not."""
    from ctcbench.runtime.decoder_functions import add_decoder_functions, is_function_target
    functions = [*(d for d in decoders or () if is_function_target(d)), *(aligners or ())]
    if score is not None and not any(is_function_target(f) for f in functions):
        fail("--score", "a --decoder or --aligner PKG.MOD:NAME with it", f"--score {score}")
    if not functions:
        return decoders
    say = (lambda line: None) if progress is False else (
        lambda line: print(line, file=sys.stderr, flush=True))
    return add_decoder_functions(decoders, aligners, score=score, say=say)


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
        except KeyError:
            raise
        except Exception as exc:  # not here, or a broken plugin: one row, as for a loss
            row = decoder_row(name, "*", *load_failure(exc))
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
