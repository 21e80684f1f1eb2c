"""``compare --resume``: a run goes on with what it was started with, and says what it holds.

Without ``--backend``, ``--case`` or ``--dtype`` a resumed run takes them from the folder's
meta.json, not the defaults (``--resume`` alone would widen a run of two backends to all of
them). Given, they may add to the run (another case, say); the folder then holds the rows of
both, and its meta.json names both, so that the page and the verdict say what they count."""
from __future__ import annotations

from pathlib import Path

from ctcbench.errors import expect
from ctcbench.runs.kinds import read_meta

SELECTION = ("backends", "cases", "dtypes")  # compare()'s arguments, lists in meta.json's
# config (cases by name; dtypes [] for each case's own)


def stored_config(out) -> dict:
    """The config the run in ``out`` recorded ({} for a run killed before writing it)."""
    return (read_meta(Path(out)) or {}).get("config") or {}


def resumed_selection(stored: dict, out, *, backends, functions, decoders, cases, dtypes):
    """``(backends, cases, dtypes)``: those given, else the stored ones. A run of decoders
    only, or of ``--function`` targets, needs them given again (an InputError)."""
    if not (backends or functions or decoders) and isinstance(stored.get("backends"), list):
        missing = [n for n in stored["backends"] if ":" in n]  # PKG.MOD:NAME: a --function
        expect(stored["backends"] and not missing, "--resume",
               f"--decoder or --function given again: the run in {out} checked "
               f"{', '.join(missing) or 'decoders only'}", "neither")
        backends = stored["backends"]
    if cases is None and stored.get("cases"):
        cases = stored["cases"]
    if dtypes is None and stored.get("dtypes"):
        dtypes = stored["dtypes"]
    return backends, cases, dtypes


def merged(now: dict, stored: dict) -> dict:
    """The selection and tolerances of ``now``'s config with ``stored``'s: what the folder
    holds after a resumed run that added to it."""
    out = {key: list(dict.fromkeys([*stored.get(key, []), *now.get(key, [])]))
           for key in SELECTION}
    if not (stored.get("dtypes") and now.get("dtypes")):
        out["dtypes"] = []  # one of them ran each case's own dtypes
    out["tolerances"] = {**stored.get("tolerances", {}), **now.get("tolerances", {})}
    return out
