"""``ctcbench bench --decoder NAME --beam 1,4,16``: decoders timed per frame against beam width.

Each size of the grid (``T``, ``N``, ``C``; ``L`` labels planted along one path with margin
``MARGIN`` over N(0, 1) logits, so the answer is a trained model's kind) is decoded by every
decoder at every beam, interleaved round by round with ``BASELINE_DECODER`` (ctcbench's greedy,
timed too), so each ratio is paired within one round, as the losses' ratios to torch are. A
greedy decoder ignores the beam: it is timed once per size, at beam 1. The rows go into a bench
run folder (``beam`` set; ``ns_per_frame`` and ``ratio_to_greedy`` in place of the losses'
columns).
"""
from __future__ import annotations

import time

import numpy as np

from ctcbench.core.ctcmath import log_softmax, minimal_path
from ctcbench.progress import Progress
from ctcbench.runtime.decoders import check_decoder_names, get_decoder
from ctcbench.runtime.protocol import BackendUnavailable
from ctcbench.runtime.status import Status

BASELINE_DECODER = "greedy"
MARGIN = 4.0


def problem(size, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """``(log_probs (T, N, C), lengths (N,))`` for one grid size, peaked along a random path."""
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(size.T, size.N, size.C))
    L = min(size.L, (size.T + 1) // 2)
    for n in range(size.N):
        path = minimal_path([int(k) for k in rng.integers(1, size.C, size=L)])
        counts = 1 + np.bincount(rng.integers(0, len(path), size=size.T - len(path)),
                                 minlength=len(path))
        x[np.arange(size.T), n, np.repeat(path, counts)] += MARGIN
    return log_softmax(x), np.full(size.N, size.T, dtype=np.int64)


def bench_decoders(names, sizes, beams, *, repeat: int, warmup: int, seed: int,
                   append=lambda row: None, progress: bool = True) -> list[dict]:
    """One row per (decoder, size, beam), each also given to ``append`` as it is made."""
    check_decoder_names(names, "--decoder")
    names = list(dict.fromkeys([BASELINE_DECODER, *names]))
    loaded, rows = {}, []
    for name in names:
        try:
            loaded[name] = get_decoder(name)
        except BackendUnavailable as exc:
            rows.append({"backend": name, "status": Status.SKIPPED, "reason": str(exc)})
    for name, decoder in list(loaded.items()):
        if decoder.traits.role == "aligner":  # it takes a target, not a beam
            rows.append({"backend": name, "status": Status.SKIPPED,
                         "reason": "an aligner: bench --decoder times decoders"})
            del loaded[name]
    for row in rows:
        append(row)
    with Progress("bench decoders", total=len(sizes) * len(beams), unit="sizes",
                  enabled=progress) as bar:
        for size in sizes:
            log_probs, lengths = problem(size, seed)
            for beam in beams:
                bar.note(f"T={size.T} N={size.N} C={size.C} beam={beam}")
                for row in _one(loaded, size, beam, log_probs, lengths, repeat, warmup,
                                first=beam == beams[0]):
                    rows.append(row)
                    append(row)
                bar.update()
    for decoder in loaded.values():
        decoder.close()
    return rows


def _one(loaded, size, beam, log_probs, lengths, repeat, warmup, *, first) -> list[dict]:
    """The rows of one size and beam: decoders timed in turn, ``repeat`` rounds."""
    timed = {n: d for n, d in loaded.items() if d.traits.role == "decoder"
             and (d.traits.search == "beam" or first or n == BASELINE_DECODER)}
    # the baseline is timed at every beam, for the pairing; a greedy row is kept once a size
    times = {n: [] for n in timed}
    failed = {}
    for round_ in range(warmup + repeat):
        order = list(timed)[round_ % len(timed):] + list(timed)[:round_ % len(timed)]
        for name in order:
            if name in failed:
                continue
            decoder = timed[name]
            start = time.perf_counter()
            try:
                decoder.decode(log_probs, lengths, blank=0,
                               beam=beam if decoder.traits.search == "beam" else 1)
            except Exception as exc:
                failed[name] = f"{type(exc).__name__}: {exc}"[:300]
                continue
            if round_ >= warmup:
                times[name].append(time.perf_counter() - start)
    base = times.get(BASELINE_DECODER) or [float("nan")]
    rows = []
    for name, decoder in timed.items():
        if decoder.traits.search != "beam" and not first:
            continue
        row = {"backend": name, "T": size.T, "N": size.N, "C": size.C, "L": size.L,
               "dtype": decoder.traits.dtype, "threads": 1,
               "beam": beam if decoder.traits.search == "beam" else 1}
        if name in failed:
            rows.append({**row, "status": Status.ERROR, "reason": failed[name]})
            continue
        t = np.array(times[name])
        ratio = t / np.array(base[:len(t)])  # paired by round
        rows.append({**row, "status": Status.OK, "repeat": len(t),
                     "time_median_s": float(np.median(t)), "time_min_s": float(t.min()),
                     "time_max_s": float(t.max()),
                     "ns_per_frame": float(np.median(t)) / (size.T * size.N) * 1e9,
                     "ratio_to_greedy": float(np.median(ratio)),
                     "ratio_min": float(np.min(ratio)), "ratio_max": float(np.max(ratio))})
    return rows


def format_rows(rows: list[dict]) -> str:
    head = ["decoder", "beam", "T", "N", "C", "median ms", "ns/frame", "x greedy [min-max]",
            "status"]
    lines = [head]
    for r in rows:
        if r.get("status") == Status.SKIPPED:
            continue
        ok = r["status"] == Status.OK
        lines.append([r["backend"], str(r["beam"]), str(r["T"]), str(r["N"]), str(r["C"]),
                      f"{r['time_median_s'] * 1e3:.3g}" if ok else "",
                      f"{r['ns_per_frame']:.3g}" if ok else "",
                      f"{r['ratio_to_greedy']:.3g} [{r['ratio_min']:.3g}-{r['ratio_max']:.3g}]"
                      if ok else "", "ok" if ok else f"{r['status']}: {r.get('reason')}"])
    widths = [max(len(line[i]) for line in lines) for i in range(len(head))]
    out = ["  ".join(c.ljust(w) for c, w in zip(line, widths)).rstrip() for line in lines]
    out += [f"skipped {r['backend']}: {r['reason']}" for r in rows
            if r.get("status") == Status.SKIPPED]
    return "\n".join(out)
