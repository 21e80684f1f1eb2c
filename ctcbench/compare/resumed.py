"""``compare --resume``: a run goes on with what it was started with, and says what it holds.

Without ``--backend``, ``--decoder``, ``--case`` or ``--dtype`` a resumed run takes them from
the folder's meta.json, not the defaults (``--resume`` alone would widen a run of two backends
to all of them). Given, they may add to the run (another case, say); the folder then holds the rows of
both, and its meta.json names both, so that the page and the verdict say what they count."""
from __future__ import annotations

from pathlib import Path

from ctcbench.errors import expect
from ctcbench.runs.kinds import read_meta

SELECTION = ("backends", "cases", "dtypes", "decoders", "decoder_cases")  # compare()'s
# choices, lists in meta.json's config (cases by name; dtypes [] for each case's own)


def stored_config(out) -> dict:
    """The config the run in ``out`` recorded ({} for a run killed before writing it)."""
    return (read_meta(Path(out)) or {}).get("config") or {}


def resumed_selection(stored: dict, out, *, backends, functions, decoders, aligners, cases,
                      dtypes):
    """``(backends, decoders, cases, dtypes)``: those given, else the stored ones. A run of
    ``--function`` targets or decoder functions needs them given again (an InputError), as
    does one whose meta.json does not say which decoders it checked."""
    if not (backends or functions or decoders or aligners) and isinstance(
            stored.get("backends"), list):
        backends, decoders = stored["backends"], stored.get("decoders")
        functions_run = [n for n in backends + (decoders or []) if ":" in n]  # PKG.MOD:NAME
        expect((backends or decoders) and not functions_run, "--resume",
               f"--function, --decoder or --aligner given again: the run in {out} checked "
               f"{', '.join(functions_run) or 'decoders it does not name'}", "none")
        if cases is None:  # the decoder cases too, by name: a name selects in its library
            cases = [*stored.get("cases", []), *stored.get("decoder_cases", [])] or None
    if cases is None and stored.get("cases"):
        cases = stored["cases"]
    if dtypes is None and stored.get("dtypes"):
        dtypes = stored["dtypes"]
    return backends, decoders or None, cases, dtypes


def merged(now: dict, stored: dict) -> dict:
    """The selection and tolerances of ``now``'s config with ``stored``'s: what the folder
    holds after a resumed run that added to it."""
    out = {key: list(dict.fromkeys([*(stored.get(key) or []), *(now.get(key) or [])]))
           for key in SELECTION}
    if not (stored.get("dtypes") and now.get("dtypes")):
        out["dtypes"] = []  # one of them ran each case's own dtypes
    out["tolerances"] = {**stored.get("tolerances", {}), **now.get("tolerances", {})}
    return out
