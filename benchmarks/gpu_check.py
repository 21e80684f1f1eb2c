"""The GPU check: one command, at most ~8 minutes, on a machine with a CUDA GPU.

    python benchmarks/gpu_check.py OUT_DIR             # install, then every step below
    python benchmarks/gpu_check.py OUT_DIR --no-install  # ctcbench is installed already
    python benchmarks/gpu_check.py OUT_DIR --dry-run   # print the plan, run nothing
    python benchmarks/gpu_check.py OUT_DIR --cpu-smoke # the same steps on CPU backends, tiny

It installs ctcbench from this checkout without the network (``pip install --no-deps
--no-build-isolation -e .``), prints the versions and the GPU, then runs each step of
``PLAN`` as its own process with its own time cap, writing the run folders under OUT_DIR.
A step that fails or runs past its cap is recorded and the next one runs; a step's cap is
also cut to what is left of the whole budget. At the end OUT_DIR holds ``summary.json`` and
``summary.md``: each step's command, exit status, seconds and run folder, the rows of each
run folder counted by status, and which aten op each torch backend ran (``paths``).
Everything is in docs/gpu.md.
"""
from __future__ import annotations

import argparse
import datetime as _dt
import json
import os
import shutil
import shlex
import signal
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TOTAL_BUDGET_S = 480  # the GPU machine's run limit is ~8 minutes

GPU_COMPARE = ("numpy", "numba", "torch", "torch-cuda", "torch-cudnn", "numba-cuda")
GPU_FUZZ = ("torch-cuda", "torch-cudnn")
GPU_DATASHEET = "torch-cuda,torch-cudnn,numba-cuda"
GPU_BENCH = ("torch", "torch-cuda", "torch-cudnn", "numba-cuda")
GPU_PATHS = "torch,torch-cuda,torch-cudnn,numba-cuda"
# bench sizes (T, N, C, L): the four target sizes (the last already C = 5000), plus
# long inputs and labels, and a large vocabulary at the middle size
BENCH_SIZES = [(1000, 32, 100, 200), (200, 16, 50, 40), (50, 8, 20, 10), (1000, 8, 5000, 100),
               (4000, 8, 100, 1000), (200, 16, 5000, 40)]
# import names of ctcbench's dependencies (pyproject.toml); `pip install --no-deps` brings none
DEPENDENCIES = ("numpy", "torch", "numba", "pandas", "matplotlib", "click", "jinja2", "tqdm",
                "hypothesis", "PIL", "captcha", "sklearn")
SMOKE_BENCH_SIZES = [(50, 2, 20, 10), (20, 2, 500, 5)]


@dataclass
class Step:
    """One step of the plan: a command and the most seconds it may take."""

    name: str
    cap_s: int
    what: str
    argv: list = field(default_factory=list)  # empty: done inside this script
    out: str | None = None  # its run folder, relative to OUT_DIR


def _ctcbench(*args) -> list:
    return [sys.executable, "-c", "from ctcbench.cli import main; main()", *args]


def _backends(names) -> list:
    return [a for n in names for a in ("--backend", n)]


def plan(out: Path, *, smoke: bool, install: bool) -> list[Step]:
    """The steps and their caps; the caps sum to at most TOTAL_BUDGET_S."""
    o = lambda name: str(out / name)  # noqa: E731
    grid = o("bench_grid.csv")
    if smoke:  # CPU backends, a few cases, tiny budgets: the plumbing, not the numbers
        compare, fuzz, sheet, bench, paths = ("numpy", "numba", "torch"), ("torch",), \
            "torch", ("torch", "numba"), "torch"
        cases, fuzz_s, sheet_s, dtypes = ["--case", "tf_*"], 4, 6, ("float64",)
    else:
        compare, fuzz, sheet, bench, paths = GPU_COMPARE, GPU_FUZZ, GPU_DATASHEET, GPU_BENCH, \
            GPU_PATHS
        cases, fuzz_s, sheet_s, dtypes = [], 30, 60, ("float32", "float64")
    steps = [Step("install", 25 if install else 0,
                  "pip install --no-deps --no-build-isolation -e . (no network)",
                  [sys.executable, "-m", "pip", "install", "--no-deps", "--no-build-isolation",
                   "-q", "-e", str(ROOT)] if install else []),
             Step("info", 10, "versions, the GPU (torch, nvidia-smi), ctcbench backends",
                  [sys.executable, __file__, "--info-step"]),
             Step("compare", 90, f"ctcbench compare of {', '.join(compare)} over the "
                  f"{'tf_* cases' if smoke else 'whole library'}",
                  _ctcbench("compare", *_backends(compare), *cases, "--no-plot", "--out",
                            o("compare")), "compare"),
             Step("paths", 35, f"{paths} on each library problem: which aten op ran, error vs the "
                  "reference, same bits twice",
                  [sys.executable, __file__, "--paths-step", o("paths"), "--backends", paths,
                   *cases], "paths")]
    for name in fuzz:
        steps.append(Step(f"fuzz-{name}", fuzz_s + 15, f"ctcbench fuzz of {name}, "
                          f"--budget {fuzz_s} (shrinking comes on top)",
                          _ctcbench("fuzz", "--backend", name, "--budget", str(fuzz_s),
                                    "--out", o(f"fuzz-{name}")), f"fuzz-{name}"))
    steps.append(Step("datasheet", 2 * sheet_s + 5 if not smoke else 40,
                      f"ctcbench datasheet of {sheet}: limits, determinism, --budget {sheet_s}",
                      _ctcbench("datasheet", "--backend", sheet, "--stages",
                                "limits,determinism", "--budget", str(sheet_s), "--timeout", "20", "--out",
                                o("datasheet")), "datasheet"))
    for dtype, cap in zip(dtypes, (45, 40)):
        steps.append(Step(f"bench-{dtype}", cap if not smoke else 40,
                          f"ctcbench bench of {', '.join(bench)} on {grid}, {dtype}",
                          _ctcbench("bench", *_backends(bench), "--grid", grid, "--dtype", dtype,
                                    "--repeat", "3" if not smoke else "1", "--out",
                                    o(f"bench-{dtype}")), f"bench-{dtype}"))
    steps.append(Step("summary", 5, "summary.json and summary.md"))
    return steps


def print_plan(steps: list[Step]) -> int:
    total = sum(s.cap_s for s in steps)
    width = max(len(s.name) for s in steps)
    print(f"{'step':<{width}}  {'cap s':>5}  what")
    for s in steps:
        print(f"{s.name:<{width}}  {s.cap_s:>5}  {s.what}")
    print(f"{'total':<{width}}  {total:>5}  (budget {TOTAL_BUDGET_S} s)")
    return total


# -- steps run inside this script (as their own process) ------------------------------------
def info_step() -> None:
    """Python, the packages, the GPU, and what ctcbench sees."""
    import importlib.metadata as md
    print("python", sys.version.split()[0], sys.executable)
    for dist in ("ctcbench", "torch", "numba", "numba-cuda", "numpy", "triton", "cupy",
                 "cupy-cuda12x", "jax", "hypothesis"):
        try:
            print(f"{dist} {md.version(dist)}")
        except md.PackageNotFoundError:
            pass
    import importlib.util
    missing = [m for m in DEPENDENCIES if importlib.util.find_spec(m) is None]
    print("ctcbench's dependencies missing here:", ", ".join(missing) or "none")
    try:
        import torch
        print("torch.cuda.is_available", torch.cuda.is_available(), "cuda", torch.version.cuda,
              "cudnn", torch.backends.cudnn.version() if torch.cuda.is_available() else None)
        if torch.cuda.is_available():
            print("torch.cuda.get_device_name", torch.cuda.get_device_name(0))
    except Exception as exc:  # report, go on
        print("torch:", type(exc).__name__, exc)
    try:
        from numba import cuda
        print("numba.cuda.is_available", cuda.is_available())
    except Exception as exc:
        print("numba.cuda:", type(exc).__name__, exc)
    if shutil.which("nvidia-smi"):
        subprocess.run(["nvidia-smi"], timeout=10, check=False)
    else:
        print("nvidia-smi: not found")
    sys.stdout.flush()
    subprocess.run(_ctcbench("backends"), timeout=60, check=False)


def paths_step(out: Path, backends: list[str], patterns: list[str]) -> None:
    """One row per (backend, case, dtype, variant): the notes saying which aten op ran, the
    error against the float64 reference within the case's own tolerance or else the case
    library's default (``problem_tolerance``), whether a second call gave the same bits, and the seconds of one
    call. It needs only ctcbench's library and the backends (no pandas, click or plotting),
    so it is also the check that still runs where the CLI cannot."""
    import numpy as np

    import ctcbench
    from ctcbench.caselib.builders import to_problem, variants
    from ctcbench.caselib.judge import problem_tolerance
    from ctcbench.caselib.library import load_cases, select_cases

    out.mkdir(parents=True, exist_ok=True)
    cases = select_cases(load_cases(), patterns or None)
    reference = ctcbench.get_backend("numpy")
    loaded = {}
    for name in backends:
        try:
            loaded[name] = ctcbench.get_backend(name)
        except ctcbench.BackendUnavailable as exc:
            loaded[name] = exc
    with open(out / "rows.jsonl", "w") as rows:
        for case in cases:
            if "error" in case.expect:
                continue
            for dtype in case.dtypes:
                try:
                    problems = [to_problem(v.raw, dtype) for v in
                                variants(case.build, case.variants, case=case.name)]
                except Exception as exc:  # the compare step reports broken cases
                    print(f"{case.name}/{dtype}: {type(exc).__name__}: {exc}")
                    continue
                for i, problem in enumerate(problems):
                    T, N, _, L = problem.shape
                    want = None
                    if dtype in ("float32", "float64") and T * N * (2 * L + 1) <= PATHS_MAX_CELLS:
                        want = reference.run(problem)
                    for name, backend in loaded.items():
                        row = {"backend": name, "case": case.name, "dtype": dtype, "variant": i}
                        if isinstance(backend, Exception):
                            row.update(status="skipped", reason=str(backend))
                        else:
                            tol = case.tolerances.get(dtype) or problem_tolerance(problem)
                            row.update(_checked(backend, problem, want, tol, np))
                        rows.write(json.dumps(row) + "\n")
                        rows.flush()


PATHS_MAX_CELLS = 4_000_000  # larger problems: the path only, no reference (compare has them)


def _checked(backend, problem, want, tol, np) -> dict:
    import ctcbench
    try:
        t0 = time.perf_counter()
        got = backend.run(problem)
        seconds = time.perf_counter() - t0
        again = backend.run(problem)
    except ctcbench.UnsupportedProblem as exc:
        return {"status": "unsupported", "reason": str(exc)[:300]}
    except Exception as exc:  # record, go on
        return {"status": "error", "reason": f"{type(exc).__name__}: {exc}"[:300]}
    row = {"path": [n for n in got.notes if n.startswith("torch path:")],
           "compute_dtype": got.compute_dtype, "seconds": round(seconds, 6),
           "same_bits": bool(np.array_equal(got.loss, again.loss, equal_nan=True)
                             and np.array_equal(got.grad_logits, again.grad_logits,
                                                equal_nan=True))}
    if want is None:
        return {"status": "ok", **row}
    from ctcbench.caselib.judge import Checks  # the comparison compare and fuzz make
    checks = Checks(tol)
    loss_err, _ = checks.loss(np.asarray(got.loss, np.float64), want.loss, problem.dtype, "numpy")
    grad_err = checks.grad(np.asarray(got.grad_logits, np.float64), want.grad_logits,
                           problem.dtype, "numpy")
    return {"status": "mismatch" if checks.failures else "ok", **row, "loss_err": loss_err,
            "grad_err": grad_err, "grad_atol": tol.grad_atol,
            "reason": checks.failures[0] if checks.failures else None}


# -- running and summing up -----------------------------------------------------------------
def run_step(step: Step, cap_s: float, out: Path) -> dict:
    """Run one step's command with a hard cap; its output goes to OUT_DIR/logs/NAME.log."""
    record = {"name": step.name, "what": step.what, "cap_s": step.cap_s,
              "given_s": round(cap_s, 1), "out": step.out,
              "command": shlex.join(step.argv), "log": f"logs/{step.name}.log"}
    if not step.argv:
        return {**record, "status": "skipped", "seconds": 0.0, "rc": None}
    if cap_s < 1:
        return {**record, "status": "no time left", "seconds": 0.0, "rc": None}
    (out / "logs").mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    with open(out / record["log"], "w") as log:
        log.write(f"$ {record['command']}\n")
        log.flush()
        proc = subprocess.Popen(step.argv, stdout=log, stderr=subprocess.STDOUT, cwd=ROOT,
                                start_new_session=True)  # its own group: killed as a whole
        try:
            rc = proc.wait(timeout=cap_s)
            status = "ok" if rc == 0 else f"exit {rc}"
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
            rc, status = None, f"timeout after {cap_s:.0f} s"
    seconds = time.perf_counter() - t0
    tail = (out / record["log"]).read_text(errors="replace").splitlines()[-15:]
    print(f"[{step.name}] {status} in {seconds:.1f} s")
    print("\n".join("    " + line for line in tail))
    sys.stdout.flush()
    return {**record, "status": status, "seconds": round(seconds, 1), "rc": rc}


def _rows(folder: Path) -> list[dict]:
    path = folder / "rows.jsonl"
    if not path.is_file():
        return []
    rows = []
    for line in path.read_text(errors="replace").splitlines():
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:
            pass
    return rows


def digest(out: Path, record: dict) -> dict:
    """What a step's run folder holds: rows per backend and status; torch paths seen."""
    if not record.get("out"):
        return {}
    rows = _rows(out / record["out"])
    counts: dict = {}
    paths: dict = {}
    for r in rows:
        b = str(r.get("backend", "?"))
        status = r.get("status") or ({True: "found", False: "clean"}.get(r.get("found"), "?")
                                     + (f" ({r['tried']} tried)" if "tried" in r else ""))
        counts.setdefault(b, Counter())[str(status)] += 1
        for note in list(r.get("path") or []) + [n for n in (r.get("notes") or [])
                                                 if str(n).startswith("torch path:")]:
            paths.setdefault(b, Counter())[str(note)] += 1
    return {"rows": len(rows), "by_status": {b: dict(c) for b, c in counts.items()},
            "torch_paths": {b: dict(c) for b, c in paths.items()}}


def write_summary(out: Path, records: list[dict], *, started: str, total_s: float,
                  plan_s: int, smoke: bool) -> None:
    summary = {"started_utc": started, "total_s": round(total_s, 1), "planned_s": plan_s,
               "budget_s": TOTAL_BUDGET_S, "cpu_smoke": smoke, "steps": records}
    (out / "summary.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    lines = [f"# GPU check, {started}{' (CPU smoke run)' if smoke else ''}", "",
             f"{total_s:.0f} s in all (planned {plan_s} s, budget {TOTAL_BUDGET_S} s).", "",
             "| step | status | s | cap s | run folder | rows by backend and status |",
             "|---|---|---|---|---|---|"]
    for r in records:
        d = r.get("digest") or {}
        by = "; ".join(f"{b}: " + ", ".join(f"{k} {v}" for k, v in sorted(c.items()))
                       for b, c in sorted((d.get("by_status") or {}).items()))
        lines.append(f"| {r['name']} | {r['status']} | {r['seconds']} | {r['cap_s']} | "
                     f"{r.get('out') or ''} | {by} |")
    paths = {}
    for r in records:
        for b, c in ((r.get("digest") or {}).get("torch_paths") or {}).items():
            for note, k in c.items():
                paths.setdefault((r["name"], b), []).append(f"{note} x{k}")
    if paths:
        lines += ["", "Which aten op ran (the torch backends' notes, per row):", ""]
        lines += [f"- {step} / {b}: {'; '.join(v)}" for (step, b), v in sorted(paths.items())]
    lines += ["", "Logs: `logs/<step>.log`; commands: `summary.json`."]
    (out / "summary.md").write_text("\n".join(lines) + "\n")


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("out", nargs="?", help="folder for the run folders, logs and summary")
    p.add_argument("--no-install", action="store_true", help="ctcbench is installed already")
    p.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    p.add_argument("--cpu-smoke", action="store_true",
                   help="the same steps on CPU backends only, tiny budgets")
    p.add_argument("--info-step", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--paths-step", metavar="DIR", help=argparse.SUPPRESS)
    p.add_argument("--backends", default="", help=argparse.SUPPRESS)
    p.add_argument("--case", action="append", default=[], help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.info_step:
        info_step()
        return 0
    if a.paths_step:
        paths_step(Path(a.paths_step), [b for b in a.backends.split(",") if b], a.case)
        return 0
    if not a.out:
        p.error("OUT_DIR is required")
    out = Path(a.out).resolve()
    steps = plan(out, smoke=a.cpu_smoke, install=not a.no_install)
    planned = sum(s.cap_s for s in steps)
    if a.dry_run:
        print_plan(steps)
        for s in steps:
            if s.argv:
                print(f"\n[{s.name}] {shlex.join(s.argv)}")
        return 0
    if out.exists() and any(out.iterdir()):
        p.error(f"OUT_DIR {out} is not empty: name a new folder")
    out.mkdir(parents=True, exist_ok=True)
    sizes = SMOKE_BENCH_SIZES if a.cpu_smoke else BENCH_SIZES
    (out / "bench_grid.csv").write_text("T,N,C,L\n" + "".join(f"{T},{N},{C},{L}\n"
                                                              for T, N, C, L in sizes))
    started = _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    print_plan(steps)
    sys.stdout.flush()
    t0 = time.perf_counter()
    records = []
    for step in steps:
        if step.name == "summary":
            break
        left = TOTAL_BUDGET_S - 5 - (time.perf_counter() - t0)  # 5 s kept for the summary
        record = run_step(step, min(step.cap_s, left), out)
        record["digest"] = digest(out, record)
        records.append(record)
        write_summary(out, records, started=started, total_s=time.perf_counter() - t0,
                      plan_s=planned, smoke=a.cpu_smoke)  # a killed run keeps its summary
    total = time.perf_counter() - t0
    records.append({"name": "summary", "what": "summary.json and summary.md", "cap_s": 5,
                    "status": "ok", "seconds": 0.0, "rc": 0, "out": None})
    write_summary(out, records, started=started, total_s=total, plan_s=planned,
                  smoke=a.cpu_smoke)
    print(f"\n{total:.0f} s; summary: {out / 'summary.md'}")
    print((out / "summary.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
