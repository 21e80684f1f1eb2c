"""``ctcbench fuzz --decoder NAME`` (or ``PKG.MOD:NAME``, or ``--aligner PKG.MOD:NAME``, a
user's own function): hypothesis draws small decoding problems, the decoder runs on each and
the judge (``ctcbench.caselib.decoder_judge``, brute force over every path) says
what is wrong; the first failure is shrunk and written as a decoder case file into
``<run>/cases/``, which ``ctcbench compare --cases <run>/cases --decoder NAME`` replays.

Drawn: 1-3 samples of 1-6 frames over 2-4 classes (C**T <= 4096: brute force stays exact),
the blank anywhere, logits from a few values (so ties are frequent) times a scale from flat to
peaked, and a beam of 1-3 or ``exact`` (``prefix_count(T, C)``, where every labelling is kept).
"""
from __future__ import annotations

import time
import warnings
from pathlib import Path

import numpy as np
from hypothesis import HealthCheck, Phase, Verbosity, given, settings
from hypothesis import seed as hypothesis_seed
from hypothesis import strategies as st
from hypothesis.database import DirectoryBasedExampleDatabase

from ctcbench.caselib.casefile import case_name
from ctcbench.caselib.decoder_cases import parse_decoder_case
from ctcbench.caselib.decoder_check import check_decoder_case
from ctcbench.errors import expect
from ctcbench.files import atomic_write
from ctcbench.progress import Progress
from ctcbench.runtime.decoders import get_decoder
from ctcbench.runtime.protocol import BackendUnavailable
from ctcbench.runtime.status import Status

LOGITS = (-2.0, -1.0, 0.0, 0.0, 0.5, 1.0, 3.0)  # repeated values make ties likely
SCALES = (0.1, 1.0, 3.0, 10.0)
EXAMPLES = 25  # per call of hypothesis; the budget decides how many calls


class Disagreement(AssertionError):
    pass


@st.composite
def decoding_problems(draw) -> dict:
    """A raw decoder case table (``cases/decoders`` format), small enough for brute force."""
    C = draw(st.integers(2, 4), label="C")
    longest = max(1, min(6, int(np.log(4096) / np.log(C))))
    N = draw(st.integers(1, 3), label="N")
    scale = draw(st.sampled_from(SCALES), label="scale")
    samples = []
    for _ in range(N):
        T = draw(st.integers(1, longest), label="T")
        rows = draw(st.lists(st.lists(st.sampled_from(LOGITS), min_size=C, max_size=C),
                             min_size=T, max_size=T), label="logits")
        samples.append({"logits": [[x * scale for x in row] for row in rows]})
    return {"name": "drawn", "description": "drawn by ctcbench fuzz", "provenance": "drawn",
            "blank": draw(st.integers(0, C - 1), label="blank"),
            "beam": draw(st.sampled_from(["exact", 1, 2, 3]), label="beam"),
            "sample": samples}


def searched_name(decoder: str | None, aligner: str | None, score: str | None = None,
                  progress: bool = True) -> str:
    """The registered name of what ``--decoder`` or ``--aligner`` names: a ``PKG.MOD:NAME``
    function registered as a decoder or aligner (:mod:`ctcbench.runtime.decoder_functions`,
    probed in its worker; what was found said on stderr), a name as it is."""
    import sys

    from ctcbench.runtime.decoder_functions import add_decoder_functions, is_function_target
    expect(score is None or is_function_target(decoder or aligner), "--score",
           "a --decoder or --aligner PKG.MOD:NAME with it", f"--score {score}")
    say = (lambda line: print(line, file=sys.stderr, flush=True)) if progress else (
        lambda line: None)
    return add_decoder_functions([decoder] if decoder else [], [aligner] if aligner else [],
                                 score=score, say=say)[0]


def judge_drawn(decoder, raw: dict) -> str | None:
    """What is wrong with ``decoder`` on the drawn case (its compare row's reason), or None."""
    row = check_decoder_case(decoder, parse_decoder_case(raw, family="fuzz", source="drawn"))
    return None if row["status"] == Status.OK else f"{row['status']}: {row['reason']}"[:400]


def fuzz_decoder(name: str, *, budget: float, seed: int, run_dir: Path,
                 progress: bool = True) -> dict:
    """One search; the summary: ``tried``, ``seconds``, ``found`` and ``what``, ``case_file``."""
    try:
        decoder = get_decoder(name)
    except BackendUnavailable as exc:
        raise ValueError(f"--decoder: {name!r} cannot run here: {exc}") from None
    state = {"tried": 0, "failing": None}
    start = time.monotonic()
    deadline = start + budget
    bar = Progress(f"fuzz {name}", unit="problems", enabled=progress)

    def test(raw):
        if state["failing"] is None and time.monotonic() > deadline:
            return
        state["tried"] += 1
        bar.update()
        what = judge_drawn(decoder, raw)
        if what is not None:
            state["failing"] = (raw, what)
            raise Disagreement(what)

    db = DirectoryBasedExampleDatabase(str(run_dir / "hypothesis"))
    chunk = 0
    try:
        while time.monotonic() < deadline and state["failing"] is None:
            options = settings(database=db, max_examples=EXAMPLES, deadline=None,
                               suppress_health_check=list(HealthCheck), print_blob=False,
                               report_multiple_bugs=False, verbosity=Verbosity.quiet,
                               phases=(Phase.explicit, Phase.reuse, Phase.generate,
                                       Phase.shrink))
            run = hypothesis_seed(seed * 1_000_003 + chunk)(
                options(given(decoding_problems())(test)))
            try:
                with warnings.catch_warnings():
                    warnings.filterwarnings("ignore", message="Generating overly large repr")
                    run()
            except Disagreement:
                break
            chunk += 1
    finally:
        bar.close()
        decoder.close()
    summary = {"backend": name, "against": "brute force", "tried": state["tried"],
               "seconds": round(time.monotonic() - start, 1), "found": state["failing"] is not None}
    if state["failing"] is not None:
        raw, what = state["failing"]  # the last failure: hypothesis's shrunk one
        path = write_decoder_case(run_dir / "cases", case_name(f"fuzz_{name}"), raw,
                                  description=f"found by ctcbench fuzz: {what}"[:300],
                                  provenance=f"ctcbench fuzz --decoder {name} --seed {seed}, "
                                             "shrunk by hypothesis; judged by brute force")
        summary.update(what=what, case_file=str(path))
    return summary


def write_decoder_case(folder: Path, name: str, raw: dict, *, description: str,
                       provenance: str) -> Path:
    """``raw`` (a drawn decoder case) as ``folder/NAME.toml`` in the library's format."""
    def q(text: str) -> str:
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    beam = q(raw["beam"]) if isinstance(raw["beam"], str) else str(raw["beam"])
    lines = ["[[case]]", f"name = {q(name)}", f"description = {q(description)}",
             f"provenance = {q(provenance)}", f"blank = {raw['blank']}", f"beam = {beam}"]
    for sample in raw["sample"]:
        rows = ", ".join("[" + ", ".join(repr(float(x)) for x in row) + "]"
                         for row in sample["logits"])
        lines += ["[[case.sample]]", f"logits = [{rows}]"]
    folder.mkdir(parents=True, exist_ok=True)
    return atomic_write(folder / f"{name}.toml", "\n".join(lines) + "\n")
