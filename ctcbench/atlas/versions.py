"""The atlas's version matrix: the entries of one framework run again on other releases of it.

Each release is installed once, alone (``pip install --no-deps --target``: the framework
changes, everything it runs on stays), into ``<cache>/<dist>-<version>``, and used offline
after that; the entries of the backends that run it are tried by ``ctcbench atlas`` in a child
process with that folder first on ``PYTHONPATH`` (the backends' workers inherit it). A release
pip cannot install here, or that does not import beside the installed stack, is said so with
the reason.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from ctcbench.errors import expect, one_of

# a distribution light enough to install beside the stack -> the backends that run it
FRAMEWORKS = {"optax": ("optax",), "keras": ("keras-jax", "keras-tf", "keras-torch")}
DEFAULT_CACHE = Path.home() / ".cache" / "ctcbench" / "versions"


def parse_versions(spec: str) -> tuple[str, list[str]]:
    """``"optax=0.2.4,0.2.8"`` -> ``("optax", ["0.2.4", "0.2.8"])``."""
    dist, _, listed = spec.partition("=")
    versions = [v.strip() for v in listed.split(",") if v.strip()]
    expect(bool(dist) and bool(versions), "--versions", "DIST=V1,V2,... (one of "
           f"{', '.join(FRAMEWORKS)}, then releases)", repr(spec))
    one_of("--versions", [dist], FRAMEWORKS)
    expect(len(set(versions)) == len(versions), "--versions", "each release once", repr(spec))
    return dist, versions


def _pip(target: Path, requirement: str) -> str | None:
    """``requirement`` alone into ``target``; pip's reason when it fails, else None."""
    run = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps",
                          "--disable-pip-version-check", "--target", str(target), requirement],
                         capture_output=True, text=True)
    if run.returncode == 0:
        return None
    lines = [line for line in run.stderr.splitlines() if line.strip() and "WARNING" not in line]
    return (lines[-1] if lines else f"pip exited {run.returncode}")[:300]


def _missing(target: Path) -> list[str]:
    """The requirements of what ``target`` holds that neither it nor the stack has (an older
    release may need a package the installed one dropped, as optax 0.2.5 needs chex)."""
    import importlib.metadata
    from packaging.requirements import Requirement
    have = {d.metadata["Name"].lower().replace("_", "-")
            for d in importlib.metadata.distributions(path=[str(target)])}
    wanted = []
    for d in importlib.metadata.distributions(path=[str(target)]):
        for text in d.requires or ():
            req = Requirement(text)
            if req.marker is not None and not req.marker.evaluate({"extra": ""}):
                continue
            name = req.name.lower().replace("_", "-")
            try:
                importlib.metadata.version(name)
            except importlib.metadata.PackageNotFoundError:
                if name not in have:
                    wanted.append(str(req))
    return wanted


def install(dist: str, version: str, cache: Path) -> tuple[Path | None, str]:
    """The folder holding ``dist==version``, and what it needs that the stack lacks, installed
    into ``cache`` once; (None, pip's reason) when it does not install here."""
    target = Path(cache) / f"{dist}-{version}"
    done = target / ".installed"
    if done.is_file():
        return target, "cached"
    target.mkdir(parents=True, exist_ok=True)
    failed = _pip(target, f"{dist}=={version}")
    for _ in range(5):  # the missing requirements of the missing requirements, a few levels
        missing = [] if failed else _missing(target)
        if not missing:
            break
        failed = next(filter(None, (_pip(target, r) for r in missing)), None)
    if failed:
        return None, failed
    done.write_text(version)
    return target, "installed"


def run_release(dist: str, version: str, target: Path, out: Path) -> list[dict]:
    """The atlas rows of ``dist``'s backends with ``target`` first on the path."""
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [str(target), *filter(None, [os.environ.get("PYTHONPATH")])])}
    backends = [a for b in FRAMEWORKS[dist] for a in ("--backend", b)]
    run = subprocess.run([sys.executable, "-c", "from ctcbench.cli import main; main()",
                          "atlas", *backends, "--out", str(out), "--format", "json"],
                         capture_output=True, text=True, env=env, timeout=3600)
    if run.returncode != 0:
        raise RuntimeError((run.stderr.strip().splitlines() or ["no output"])[-1][:300])
    return [r for r in json.loads(run.stdout)["rows"] if r.get("backend") in FRAMEWORKS[dist]]


def version_matrix(spec: str, out: Path, cache: Path = DEFAULT_CACHE, say=print) -> dict:
    """``{"framework", "versions": {version: {"release": ..., entry id: outcome}},
    "first_bad"/"first_fixed": {entry id: version}}`` for the releases ``spec`` names, in the
    order given (oldest first, as they are compared)."""
    dist, versions = parse_versions(spec)
    table: dict[str, dict] = {}
    for version in versions:
        target, how = install(dist, version, cache)
        if target is None:
            table[version] = {"release": f"does not install here: {how}"}
            say(f"atlas: {dist} {version}: does not install here: {how}")
            continue
        say(f"atlas: {dist} {version} ({how}): trying its entries")
        try:
            rows = run_release(dist, version, target, Path(out) / f"{dist}-{version}")
        except (RuntimeError, subprocess.TimeoutExpired) as exc:
            table[version] = {"release": f"does not run here: {exc}"}
            continue
        table[version] = {"release": "ran", **{r["id"]: r["status"] for r in rows}}
    first_bad, first_fixed = firsts(table)
    return {"framework": dist, "versions": table, "first_bad": first_bad,
            "first_fixed": first_fixed}


def firsts(table: dict) -> tuple[dict, dict]:
    """Per entry, the first release (in ``table``'s order) that reproduces it, and the first
    after the last one that does where it is fixed. Releases that did not run are skipped."""
    ran = [v for v, t in table.items() if t["release"] == "ran"]
    first_bad, first_fixed = {}, {}
    for eid in sorted({k for v in ran for k in table[v] if k != "release"}):
        outcomes = [table[v].get(eid) for v in ran]
        bad = [i for i, s in enumerate(outcomes) if s == "reproduces"]
        if bad:
            first_bad[eid] = ran[bad[0]]
            fixed = [ran[i] for i in range(bad[-1] + 1, len(ran)) if outcomes[i] == "fixed"]
            if fixed:
                first_fixed[eid] = fixed[0]
    return first_bad, first_fixed
