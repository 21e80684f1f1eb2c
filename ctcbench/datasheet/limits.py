"""The datasheet's limits: per axis, the largest size at which the backend is right, and what
it does one step past it. Each probe is a row, so a resumed run replays the probes it has
instead of running them again, and the search comes out the same."""
from __future__ import annotations

from ctcbench.caselib.builders import problem_of
from ctcbench.core.memory import available_bytes
from ctcbench.datasheet.axes import AXES
from ctcbench.datasheet.probe import probe, problem_bytes
from ctcbench.datasheet.search import Clock, Limit, Outcome, Status, largest_correct

FLOOR_S = 5.0  # a probe may always take this long (within --timeout) before it is a hang
SLOWDOWN = 20  # ... or this many times the last right probe's seconds, scaled by its size
CONFIRM = 2  # other seeds a "wrong" cliff is tried again at


def _outcome(row: dict) -> Outcome:
    return Outcome(Status(row["status"]), row.get("detail") or "", row.get("loss_err"),
                   row.get("grad_err"), row.get("seconds"))


def limit_row(limit: Limit, axis) -> dict:
    """The verdict row of one axis."""
    past = limit.past
    return {"stage": "limit", "item": limit.axis, "axis": limit.axis, "what": axis.what,
            "correct": limit.correct, "failing": limit.failing,
            "correct_shape": None if limit.correct is None else list(axis.shape(limit.correct)),
            "failing_shape": None if limit.failing is None else list(axis.shape(limit.failing)),
            "status": limit.cliff,
            "past_status": past.status if past else None,
            "detail": past.detail if past else None,
            "loss_err": past.loss_err if past else None, "grad_err": past.grad_err if past else None,
            "stopped": limit.stopped, "exact": limit.exact, "sharp": limit.sharp,
            "probes": len(limit.probes)}


def search_axis(axis, backend, oracle, dtype: str, *, clock: Clock, deadline: float,
                bisect_until: float, timeout_s: float, max_bytes: int, seed: int, done: dict,
                write, progress) -> Limit:
    """One axis of one backend and dtype; ``done`` maps a probe's item to its row (resume),
    ``write(row)`` records a new one; ``deadline`` and ``bisect_until`` are ``clock`` times."""
    last = {}  # the last right probe: p, seconds

    def budget_for(p: int) -> float:
        floor = min(timeout_s, FLOOR_S)
        if not last or not last["seconds"]:
            return timeout_s if not last else floor
        grow = max(axis.cells(p) / axis.cells(last["p"]), axis.logits(p) / axis.logits(last["p"]))
        return min(timeout_s, max(floor, SLOWDOWN * last["seconds"] * grow))

    def run(p: int) -> Outcome:
        item = f"{axis.name}={p}"
        progress.note(f"{backend.name} {dtype} {item}")
        if item in done:
            outcome = _outcome(done[item])
        else:
            if backend.worker_pid is None:  # a new worker (after a crash or a hang): its
                with clock.paused():  # start and first compilation are not the probe's
                    warm_up(backend, dtype)
            outcome = probe(backend, oracle, problem_of(axis.build(p, seed), dtype), budget_for(p))
            T, N, C, L = axis.shape(p)
            write({"stage": "probe", "item": item, "axis": axis.name, "value": p,
                   "T": T, "N": N, "C": C, "L": L, "status": outcome.status,
                   "detail": outcome.detail, "loss_err": outcome.loss_err,
                   "grad_err": outcome.grad_err, "seconds": outcome.seconds})
        progress.update()
        if outcome.ok:
            last.update(p=p, seconds=outcome.seconds)
        return outcome

    free = available_bytes()
    room = max_bytes if free is None else min(max_bytes, free)
    limit = largest_correct(axis.name, run, start=axis.start, cap=axis.cap, deadline=deadline,
                            bisect_until=bisect_until, clock=clock.now,
                            fits=lambda p: problem_bytes(*axis.shape(p)) <= room)
    if limit.exact and limit.correct is not None and limit.past.status == Status.WRONG:
        limit.sharp = _same_at_other_seeds(limit, axis, backend, oracle, dtype, seed, done,
                                           write, budget_for)
    return limit


def _same_at_other_seeds(limit, axis, backend, oracle, dtype, seed, done, write,
                         budget_for) -> bool:
    """A wrong answer past a size may be a cliff (wrong at every draw of the logits) or an
    error that grows with the size and meets the dtype's bound (float32 over long inputs):
    the last right and first wrong sizes again at ``CONFIRM`` other seeds tell them apart."""
    same = True
    for extra in range(1, CONFIRM + 1):
        for p, want_ok in ((limit.correct, True), (limit.failing, False)):
            item = f"{axis.name}={p} seed+{extra}"
            if item in done:
                status = done[item]["status"]
            else:
                out = probe(backend, oracle, problem_of(axis.build(p, seed + extra), dtype),
                            budget_for(p))
                status = out.status
                write({"stage": "confirm", "item": item, "axis": axis.name, "value": p,
                       "seed": seed + extra, "status": status, "detail": out.detail,
                       "loss_err": out.loss_err, "grad_err": out.grad_err,
                       "seconds": out.seconds})
            same &= (status == Status.OK) == want_ok
    return same


WARM_UP = {"generator": "random", "C": 3, "seed": 0, "sample": [{"target": [1], "T": 3}]}


def warm_up(backend, dtype: str) -> None:
    """One call on a tiny problem: the worker starts, the framework loads and compiles."""
    try:
        backend.run(problem_of(WARM_UP, dtype))
    except Exception:  # what is wrong with the backend is the probes' to find
        pass


def limits(backend, oracle, dtype: str, *, axes, budget_s: float, timeout_s: float,
           max_bytes: int, seed: int, done: dict, write, progress) -> list[Limit]:
    """Every axis in ``axes`` (names of ``AXES``), sharing ``budget_s`` seconds of probing
    (a worker's restart after a crash or a hang is not counted): each axis
    doubles for an equal share of what the earlier ones left (at least half its share of
    ``budget_s``), and a bisection under way may go on to the end of ``budget_s`` and at least
    one share past its axis' own, so that a cliff once found is found to the step. Axes with
    a verdict row are not searched again."""
    clock = Clock()
    out, end = [], clock.now() + budget_s
    share = budget_s / max(len(axes), 1)
    for i, name in enumerate(axes):
        axis = AXES[name]
        if ("limit", name) in done:
            continue
        now = clock.now()
        deadline = now + max(share / 2, (end - now) / (len(axes) - i))
        probes = {item: r for (stage, item), r in done.items() if stage == "probe"}
        limit = search_axis(axis, backend, oracle, dtype, clock=clock, deadline=deadline,
                            bisect_until=max(deadline + share, end), timeout_s=timeout_s,
                            max_bytes=max_bytes, seed=seed, done=probes, write=write,
                            progress=progress)
        write(limit_row(limit, axis))
        out.append(limit)
    return out
