"""The datasheet's worst precision: a search for the input with the largest error against the
float64 reference, in one dtype.

A candidate is a few numbers (``Genes``): frames ``T``, classes ``C``, labels ``L``, the share
of repeated labels, and either the logit scale of random frames or, for frames peaked on one
alignment of the target, how close to certain the peak is. The search draws ``START``
candidates at random plus the corners of the space, then climbs: it changes one number of the
worst candidate so far (double or halve it, or jump to a bound), keeps the change when the
error grows, and repeats a change that made it grow. Three climbs share the budget: on the
absolute loss error, on the loss error relative to ``max(1, |loss|)``, and on the gradient
error.
Every candidate is a case library ``[case.build]`` table, so the worst is written as a case file.
"""
from __future__ import annotations

import math
import time
from dataclasses import asdict, dataclass, replace

import numpy as np

from ctcbench.caselib.builders import problem_of
from ctcbench.caselib.judge import result_errors
from ctcbench.datasheet.probe import call, exact, problem_bytes
from ctcbench.datasheet.search import Status

# the space searched
T_RANGE = (2, 4096)
C_RANGE = (3, 1024)
L_MAX = 512  # labels: beyond, the reference needs its slow checkpointed path
SCALE_RANGE = (1e-2, 1e4)  # random frames: logits N(0, scale^2)
DOUBT_RANGE = (1e-12, 0.5)  # peaked frames: the peak's probability is 1 - doubt
START = 8  # random candidates before climbing
CLIMBS = {"loss": "loss_err", "loss_rel": "loss_score", "grad": "grad_err"}  # what each maximises


@dataclass(frozen=True)
class Genes:
    """One candidate. ``L`` is capped so the target fits in ``T`` frames."""

    frames: str  # "random" or "peaked"
    T: int
    C: int
    L: int
    repeats: float  # share of labels equal to the one before, in [0, 1]
    scale: float  # random frames
    doubt: float  # peaked frames
    seed: int

    def fitted(self) -> "Genes":
        T = int(min(max(self.T, T_RANGE[0]), T_RANGE[1]))
        C = int(min(max(self.C, C_RANGE[0]), C_RANGE[1]))
        L = int(min(max(self.L, 1), T // (2 if self.repeats > 0 else 1), L_MAX))
        return replace(self, T=T, C=C, L=max(L, 1),
                       repeats=float(min(max(self.repeats, 0.0), 1.0)),
                       scale=float(min(max(self.scale, SCALE_RANGE[0]), SCALE_RANGE[1])),
                       doubt=float(min(max(self.doubt, DOUBT_RANGE[0]), DOUBT_RANGE[1])))


def _target(g: Genes, rng) -> list[int]:
    out = [int(rng.integers(1, g.C))]
    for _ in range(g.L - 1):
        if rng.random() < g.repeats:
            out.append(out[-1])
        else:
            step = int(rng.integers(1, g.C - 1))
            out.append((out[-1] - 1 + step) % (g.C - 1) + 1)
    return out


def spread_path(target: list[int], T: int) -> list[int]:
    """An alignment of ``target`` over ``T`` frames: each label held for an equal share of
    the frames, a blank between repeats, blanks at the end."""
    seq = []
    for i, k in enumerate(target):
        if i and target[i - 1] == k:
            seq.append(0)
        seq.append(k)
    hold = max(1, T // max(len(seq), 1))
    path = [k for k in seq for _ in range(hold)][:T]
    if len(path) < len(seq):  # T too short to hold each label: one frame each
        path = seq[:T]
    return path + [0] * (T - len(path))


def build(g: Genes) -> dict:
    """The ``[case.build]`` table of a candidate (two samples of ``T`` frames)."""
    rng = np.random.default_rng(g.seed)
    targets = [_target(g, rng) for _ in range(2)]
    if g.frames == "peaked":
        return {"generator": "peaked", "C": g.C, "blank": 0, "peak": 1.0 - g.doubt,
                "sample": [{"target": t, "path": spread_path(t, g.T)} for t in targets]}
    return {"generator": "random", "C": g.C, "blank": 0, "seed": g.seed, "scale": g.scale,
            "T": g.T, "sample": [{"target": t, "T": g.T} for t in targets]}


def scores(got, want) -> dict:
    """The errors of one result: the largest loss error, absolute and as a share of
    ``max(1, |loss|)``, and the largest gradient error. NaN counts as infinitely wrong."""
    err, grad = (np.where(np.isnan(e), np.inf, e) for e in result_errors(got, want))
    scale = np.maximum(1.0, np.where(np.isfinite(want.loss), np.abs(want.loss), 1.0))  # (N,)
    return {"loss_err": float(err.max(initial=0.0)),
            "loss_score": float((err / scale).max(initial=0.0)),
            "grad_err": float(grad.max(initial=0.0))}


def _corners(seed: int) -> list[Genes]:
    hi_T, hi_C = T_RANGE[1], C_RANGE[1]
    return [Genes("random", hi_T, 64, 64, 0.0, SCALE_RANGE[1], 0.5, seed),
            Genes("random", hi_T, hi_C, 256, 0.3, 1.0, 0.5, seed + 1),
            Genes("peaked", hi_T, 64, 64, 0.3, 1.0, DOUBT_RANGE[0], seed + 2),
            Genes("peaked", 64, 16, 8, 0.0, 1.0, DOUBT_RANGE[0], seed + 3)]


def _random(rng, seed: int) -> Genes:
    def log_uniform(lo, hi):
        return float(math.exp(rng.uniform(math.log(lo), math.log(hi))))
    T = int(log_uniform(*T_RANGE))
    return Genes(str(rng.choice(["random", "peaked"])), T, int(log_uniform(*C_RANGE)),
                 int(log_uniform(1, max(T // 2, 1.01))), float(rng.choice([0.0, 0.2, 0.5])),
                 log_uniform(*SCALE_RANGE), log_uniform(*DOUBT_RANGE), seed)


GENES = {"random": ("T", "C", "L", "repeats", "scale", "frames"),  # what a kind's frames use
         "peaked": ("T", "C", "L", "repeats", "doubt", "frames")}
MOVES = 6  # 0 half, 1 double, 2 low bound, 3 high bound, 4 / 1.25, 5 * 1.25
SLOPES = {(gene, move) for gene in ("T", "C", "L", "repeats", "scale", "doubt")
          for move in (0, 1, 4, 5)}  # the moves a climb follows again: steps, not jumps


def mutate(g: Genes, seed: int, move: tuple[str, int]) -> Genes:
    """``g`` with one number halved, doubled, moved by a quarter or set to a bound (coarse steps
    to cross the space, fine ones to climb a peak), or its frames' kind switched; a new seed
    for the draws. ``move``: (the gene, which of the ``MOVES``)."""
    gene, move = move
    ranges = {"T": T_RANGE, "C": C_RANGE, "L": (1, T_RANGE[1]), "scale": SCALE_RANGE,
              "doubt": DOUBT_RANGE, "repeats": (0.0, 1.0)}
    if gene == "frames":
        return replace(g, frames="peaked" if g.frames == "random" else "random", seed=seed)
    value = getattr(g, gene)
    lo, hi = ranges[gene]
    if gene in ("scale", "doubt"):
        value = [value / 4, value * 4, lo, hi, value / 1.5, value * 1.5][move]
    elif gene == "repeats":
        value = [value / 2, min(1.0, value * 2 + 0.1), 0.0, 0.9, value * 0.8,
                 min(1.0, value * 1.25 + 0.05)][move]
    else:
        value = [value // 2, value * 2, lo, hi, value / 1.25, value * 1.25 + 1][move]
    return replace(g, **{gene: type(getattr(g, gene))(value)}, seed=seed)


def next_move(g: Genes, rng, repeat: tuple[str, int] | None) -> tuple[str, int]:
    """The move a climb tries on its worst ``g`` (fitted): ``repeat``, the step (one of
    ``SLOPES``) that last raised the climb's error (a slope is followed while it rises), else
    a random move; either changes something other than the seed."""
    def changes(move):
        return mutate(g, g.seed, move).fitted() != g
    if repeat is not None and changes(repeat):
        return repeat
    while True:  # switching the frames always changes something
        move = (str(rng.choice(GENES[g.frames])), int(rng.integers(MOVES)))
        if changes(move):
            return move


def worst_precision(backend, oracle, dtype: str, *, budget_s: float, timeout_s: float,
                    max_bytes: int, seed: int, done: dict, write, progress,
                    trials: int | None = None) -> dict:
    """Search for ``budget_s`` seconds or ``trials`` candidates, whichever ends first; returns
    the verdict: the worst loss and gradient errors found, each with its candidate and
    ``[case.build]`` table, and how many were tried. The candidates follow from ``seed`` and
    the errors found, so a count of trials gives the same search on any machine where no
    candidate times out and the budget does not end it first. A candidate may take
    ``timeout_s``; one estimated to need more than ``max_bytes`` is not run (it counts
    towards ``trials``, and as ``too_large``). ``done`` maps ``(stage, item)`` to the rows the
    run folder holds (resume replays the trials), ``write(row)`` records one."""
    rng = np.random.default_rng(seed)
    end = time.monotonic() + budget_s
    best = dict.fromkeys(CLIMBS)  # climb -> (its score, genes, the trial's row)
    tried = failed = considered = too_large = 0
    done = {item: row for (stage, item), row in done.items() if stage == "trial"}

    def more() -> bool:
        return time.monotonic() < end and (trials is None or considered < trials)

    def evaluate(g: Genes) -> None:
        nonlocal tried, failed, considered, too_large
        g = g.fitted()
        considered += 1
        if problem_bytes(g.T, 2, g.C, g.L) > max_bytes:
            too_large += 1
            return
        item = f"{dtype}#{tried}"
        tried += 1
        progress.note(f"{backend.name} {dtype} precision T={g.T} C={g.C} L={g.L} {g.frames}")
        if item in done and done[item].get("genes") == asdict(g):
            row = done[item]
        else:
            problem = problem_of(build(g), dtype)
            got, failure = call(backend, problem, timeout_s)
            row = {"stage": "trial", "item": item, "genes": asdict(g)}
            if failure is not None:
                row.update(status=failure.status, detail=failure.detail)
            else:
                row.update(status=Status.OK, **scores(got, exact(oracle, problem)))
            write(row)
        progress.update()
        if row["status"] != Status.OK:
            failed += 1
            return
        for key, field in CLIMBS.items():
            if best[key] is None or row[field] > best[key][0]:
                best[key] = (row[field], g, row)

    for g in _corners(seed) + [_random(rng, seed + 10 + i) for i in range(START)]:
        if not more():
            break
        evaluate(g)
    rising = dict.fromkeys(CLIMBS)  # climb -> the move that last raised its score
    step = 0
    while more() and any(best.values()):
        key = list(CLIMBS)[step % len(CLIMBS)]
        step += 1
        if best[key] is not None:
            parent = best[key][1]
            move = next_move(parent, rng, rising[key])
            evaluate(mutate(parent, seed + 1000 + step, move))
            rising[key] = move if best[key][1] is not parent and move in SLOPES else None
    verdict = {"stage": "precision", "item": dtype, "tried": tried, "failed": failed,
               "too_large": too_large}
    for key, found in best.items():
        if found is not None:
            score, g, row = found
            verdict[key] = {"genes": asdict(g), "build": build(g), "loss_err": row["loss_err"],
                            "loss_score": row["loss_score"], "grad_err": row["grad_err"]}
    return verdict
