"""The ``bench`` driver: measure every backend at every size of a grid, resumably, then
compare with a baseline and export tables and plots.

Sizes and grids are in ``ctcbench.runtime.sizes``, how one size is measured in
``ctcbench.runtime.measure``. Rows go to ``rows.jsonl`` in the run folder as each size
finishes (see ``ctcbench.runs.store``), so a run given ``--resume`` continues where it stopped.
"""
from __future__ import annotations

import math
from dataclasses import asdict

import pandas as pd

from ctcbench.bench.config import BenchSettings
from ctcbench.bench.kind import KEY, KIND
from ctcbench.errors import expect
from ctcbench.files import atomic_write, to_json
from ctcbench.runs.store import RunResult, check_out, open_run
from ctcbench.runtime.measure import BASELINE, measure_size, resolve_backends, set_threads
from ctcbench.runtime.sizes import load_grid
from ctcbench.settings import from_options
from ctcbench.runtime.status import TIMED, TRANSIENT, Status


def records(df: pd.DataFrame) -> list[dict]:
    """The rows of a bench ``RunResult`` as dicts, each holding only the fields it has."""
    return [{k: v for k, v in r.items() if not (isinstance(v, float) and math.isnan(v))}
            for r in df.to_dict(orient="records")]


def _measure_all(run, *, sizes, resolved, repeat, warmup, dtype, seed, config, threads,
                 between, progress) -> tuple[list[dict], int]:
    """Measure every (thread count, size) not done yet into the open folder ``run``;
    (rows, sizes resumed)."""
    # A size is measured for every backend at once (ratios to torch are interleaved), so it is
    # done only when each backend's row is there, none failed (that may be transient) and none
    # is of another --repeat or --between-calls; the rows of a size not done are dropped and
    # it is measured again (rows from before --between-calls were back to back).
    def size_key(r):
        return (r.get("T"), r.get("N"), r.get("C"), r.get("L"), r.get("dtype"), r.get("threads"))

    good = {}
    for r in run.rows():
        good.setdefault(size_key(r), set())
        if (r.get("status") not in TRANSIENT and r.get("repeat") == repeat
                and r.get("between_calls", "nothing") == between):
            good[size_key(r)].add(r.get("backend"))
    done = {k for k, names in good.items() if set(resolved) <= names}
    run.keep_rows(lambda r: size_key(r) in done)
    run.write_meta(config)
    todo = [(n, s) for n in threads for s in sizes if (s.T, s.N, s.C, s.L, dtype, n) not in done]
    from ctcbench.progress import Progress
    with Progress("bench", total=len(todo), unit="sizes", enabled=progress) as bar:
        for n, size in todo:
            set_threads(n)  # a worker started with another count is restarted on its next call
            bar.note(f"{size.label} threads={n}")
            for row in measure_size(resolved, size, dtype=dtype, repeat=repeat, warmup=warmup,
                                    seed=seed, threads=n, between=between):
                run.log.append(row)
            bar.update()
    wanted = {(name, s.T, s.N, s.C, s.L, dtype, n, None) for n in threads for s in sizes
              for name in resolved}  # beam: None, a loss's row
    latest = {}
    for row in run.rows():
        key = tuple(row.get(k) for k in KEY)
        if key in wanted:
            latest[key] = row
    rows = sorted(latest.values(), key=lambda r: (r["threads"], r["cells"], r["T"], r["N"],
                                                  r["C"], r["L"], r["backend"]))
    return rows, len(threads) * len(sizes) - len(todo)


def bench(*, backends=(), out=None, resume: bool = False, baseline=None, fail_on=(),
          plot: bool = True, progress: bool = True, decoders=(), beams=(1, 4, 16),
          **options) -> RunResult:
    """Measure every backend at every size of ``grid``, compare with ``baseline`` if given,
    export ``bench.csv``, ``bench.json`` and (``plot``) the plots into the run folder.

    ``options``: the fields of :class:`ctcbench.bench.config.BenchSettings`, each with its
    default and help there: ``grid``, ``repeat``, ``warmup``, ``threads`` (a count or a list
    of counts, ``[1, 2]``: one row per backend, size and count, the thread-scaling plot),
    ``dtype``, ``seed``, ``between_calls``. ``out``: run folder (default
    ``reports/bench-<UTC time>``); one that already holds a run is refused unless ``resume``,
    which keeps the sizes measured (ok, same ``repeat`` and ``between_calls``) and measures
    the rest. Returns a ``RunResult``: one row per (backend, size,
    dtype); ``summary`` holds ``regressions`` (one message per ``fail_on`` limit exceeded)
    and status counts. ``decoders``: time these decoders instead, at each of ``beams``, per
    frame and as paired ratios to ctcbench's greedy (:mod:`ctcbench.bench.decoders`; the
    grid, repeat, warmup and seed apply).
    """
    from ctcbench.bench.baseline import check_gated, compare, load_rows, parse_fail_on
    from ctcbench.bench.plots import bench_plots

    check_out(KIND, out, resume=resume)
    s = from_options(BenchSettings, options, "bench()")
    grid, repeat, warmup, dtype, seed = s.grid, s.repeat, s.warmup, s.dtype, s.seed
    rules = [parse_fail_on(spec) for spec in fail_on]  # bad options fail before any timing
    expect(baseline is not None or not rules, "fail-on", "a --baseline to compare with",
           "no baseline")
    old = load_rows(baseline) if baseline is not None else None
    if old is not None:
        check_gated(old, rules, baseline)  # a metric it cannot compare fails before any timing
    sizes = load_grid(grid)
    expect(not decoders or s.between_calls == "nothing", "between-calls",
           "nothing with --decoder (decoders are timed back to back)", s.between_calls)
    if decoders:
        return _bench_decoders(decoders, beams, sizes, s, out=out, resume=resume,
                               progress=progress)
    threads = list(s.threads)
    thread_info = set_threads(threads[0])
    resolved = resolve_backends(backends)
    with open_run(KIND, out, resume=resume) as run:
        config = {"grid": grid, "sizes": [asdict(s) for s in sizes], "backends": list(resolved),
                  "repeat": repeat, "warmup": warmup, "dtype": dtype, "seed": seed,
                  "baseline": BASELINE, **thread_info, "threads": threads,
                  "between_calls": s.between_calls}
        rows, resumed = _measure_all(run, sizes=sizes, resolved=resolved, repeat=repeat,
                                     warmup=warmup, dtype=dtype, seed=seed, config=config,
                                     threads=threads, between=s.between_calls,
                                     progress=progress)
        regressions = compare(rows, old, rules) if old is not None else []
        df = pd.DataFrame(rows, dtype=object)
        atomic_write(run.run_dir / "bench.csv", df.to_csv(index=False))
        atomic_write(run.run_dir / "bench.json", to_json(rows, indent=1) + "\n")
        files = [run.run_dir / "bench.csv", run.run_dir / "bench.json"]
        if plot:
            files += bench_plots(rows, run.run_dir)
    counts = {s: sum(r.get("status") == s for r in rows) for s in TIMED}
    summary = {"failed": bool(regressions), "regressions": regressions, "counts": counts,
               "resumed_sizes": resumed, "run_dir": str(run.run_dir)}
    return RunResult(run.run_dir, df, summary, run.environment, resumed=resumed, files=files)


def _bench_decoders(decoders, beams, sizes, s, *, out, resume, progress) -> RunResult:
    from ctcbench.bench.decoders import bench_decoders
    expect(bool(beams) and all(isinstance(b, int) and b >= 1 for b in beams), "--beam",
           "positive beam widths", list(beams))
    with open_run(KIND, out, resume=resume) as run:
        run.write_meta({"decoders": list(decoders), "beams": list(beams), "grid": s.grid,
                        "sizes": [asdict(z) for z in sizes], "repeat": s.repeat,
                        "warmup": s.warmup, "seed": s.seed})
        rows = bench_decoders(decoders, sizes, list(beams), repeat=s.repeat, warmup=s.warmup,
                              seed=s.seed, append=run.log.append, progress=progress)
        df = pd.DataFrame(rows, dtype=object)
        atomic_write(run.run_dir / "bench.csv", df.to_csv(index=False))
        atomic_write(run.run_dir / "bench.json", to_json(rows, indent=1) + "\n")
    counts = {st: sum(r.get("status") == st for r in rows) for st in (Status.OK, Status.ERROR,
                                                                      Status.SKIPPED)}
    summary = {"failed": bool(counts[Status.ERROR]), "regressions": [], "counts": counts,
               "resumed_sizes": 0, "run_dir": str(run.run_dir), "decoders": True}
    return RunResult(run.run_dir, df, summary, run.environment,
                     files=[run.run_dir / "bench.csv", run.run_dir / "bench.json"])


def _ms(x) -> str:
    if x is None:
        return ""
    ms = x * 1e3
    return f"{ms:.0f}" if ms >= 100 else f"{ms:.3g}"


def format_table(rows: list[dict]) -> str:
    """A fixed-width table for people: one line per backend and size; backends skipped
    everywhere (cannot run here) are listed once below it."""
    skipped = {r["backend"]: r.get("reason") for r in rows if r.get("status") == Status.SKIPPED}
    rows = [r for r in rows if r.get("status") != Status.SKIPPED]
    has_base = any("change_time" in r for r in rows)
    head = ["backend", "threads", "T", "N", "C", "L", "cells", "median ms", "min-max ms",
            "ns/cell", "x torch [min-max]", "1st call ms", "run() ms", "round trip ms", "peak MiB"] + (
        ["vs baseline"] if has_base else []) + ["status"]
    lines = []
    for r in rows:
        ok = r.get("status") == Status.OK
        ratio = "" if r.get("ratio_to_torch") is None else (
            f"{r['ratio_to_torch']:.2f} [{r['ratio_min']:.2f}-{r['ratio_max']:.2f}]")
        peak = r.get("peak_rss_mb")
        line = [r["backend"], r.get("threads", ""), r["T"], r["N"], r["C"], r["L"], r["cells"],
                _ms(r.get("time_median_s")) if ok else "",
                f"{_ms(r['time_min_s'])}-{_ms(r['time_max_s'])}" if ok else "",
                f"{r['ns_per_cell']:.3g}" if ok else "", ratio,
                _ms(r.get("first_call_s")) if ok else "",
                _ms(r.get("run_s")) if ok else "",
                _ms(r.get("roundtrip_s")) if ok else "",
                "" if peak is None else f"{peak:.1f}"]
        if has_base:
            line.append(f"{r['change_time']:+.0%} time" if "change_time" in r else "")
        line.append("ok" if ok else f"{r['status']}: {r.get('reason')}")
        lines.append([str(x) for x in line])
    widths = [max(len(h), *(len(l[i]) for l in lines)) if lines else len(h)
              for i, h in enumerate(head)]
    fmt = lambda cells: "  ".join(c.ljust(w) if i == 0 or i == len(cells) - 1 else c.rjust(w)
                                  for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    notes = [f"skipped {name}: {reason}" for name, reason in skipped.items()]
    return "\n".join([fmt(head), fmt(["-" * w for w in widths]), *map(fmt, lines), *notes])
