"""What the tables of known CTC bugs say against what the installed stack does.

* Known issues that no longer reproduce: a row that passes although a known issue claims it
  (``cases/known_issues.toml``, a plugin's ``known_issues``, or ``--known-issues`` for a
  ``--function``). The gate does not fail on it (an upstream fix is good news), but it is
  said, so a list of known failures cannot go stale silently. An issue that claims its rows
  by a pattern (``cases = ["*"]``: a precision bug that shows on some cases only) is said
  once, when none of its rows fails; while one does, the bug is there.
* Regressions: an atlas entry (``cases/atlas.toml``) that reproduces here although its
  ``fixed_in`` names a release of its framework at or below the installed one. A ``fixed_in``
  that is a PR or a commit names no release, so it cannot be compared: that is said, and
  nothing is flagged. The installed release is the distribution's metadata
  (``importlib.metadata``), the one the running process imports.
"""
from __future__ import annotations

import importlib.metadata

from packaging.utils import canonicalize_name
from packaging.version import InvalidVersion, Version

from ctcbench.caselib.known import known_issue, load_atlas, release_of
from ctcbench.compare.checks import known_claim
from ctcbench.runtime.status import FAILING, Status

# one framework, several wheels: a release of the first is a release of each
WHEELS = {"tensorflow": ("tensorflow", "tensorflow-cpu", "tensorflow-gpu")}
_SHOWS = (Status.KNOWN, *FAILING)  # rows on which a bug shows: failing, or failing as known


def stale_known_issues(rows, backends, versions: dict) -> list[str]:
    """One line per passing row a known issue claims by its name, with the claim and the
    releases it passed on; one per issue claiming rows by a pattern, none of which fails.
    ``backends``: the loaded backends by name; ``versions``: backend -> {distribution:
    version}."""
    passing: dict[tuple, list] = {}  # (backend, entry) -> [(row, why, names the case?)]
    shown = set()  # (backend, entry) failing as known on some row
    for r in rows:
        backend = backends.get(r.get("backend"))
        claim = None if backend is None else known_claim(backend, r["case"], r["dtype"])
        if claim is None:
            continue
        why, entry, named = claim
        if r.get("status") == Status.KNOWN:
            shown.add((r["backend"], entry))
        elif r.get("status") == Status.OK:
            passing.setdefault((r["backend"], entry), []).append((r, why, named))
    out = []
    for (name, entry), found in passing.items():
        on = ", ".join(f"{d} {v}" for d, v in versions.get(name, {}).items() if d != "ctcbench")
        on = f" on {on}" if on else ""
        out += [f"{name}/{r['case']}/{r['dtype']}: listed as known ({why}) but passes{on}"
                for r, why, named in found if named]
        by_pattern = [f"{r['case']}/{r['dtype']}" for r, _, named in found if not named]
        if by_pattern and (name, entry) not in shown:
            listed = ", ".join(by_pattern[:3]) + (", ..." if len(by_pattern) > 3 else "")
            out.append(f"{name} ({entry}): listed as known ({found[0][1]}) but all "
                       f"{len(by_pattern)} rows it claims pass{on}: {listed}")
    return out


def installed(dist: str) -> tuple[str, Version] | None:
    """The installed wheel of ``dist``'s framework and its release, or None."""
    name = canonicalize_name(dist)
    for wheel in WHEELS.get(name, (name,)):
        try:
            return wheel, Version(importlib.metadata.version(wheel))
        except (importlib.metadata.PackageNotFoundError, InvalidVersion):
            continue
    return None


def fixed_in_check(entry) -> tuple[str | None, str | None]:
    """For an entry that reproduces here: (the regression, or None; what was compared, or
    why nothing could be). Both None without a ``fixed_in``."""
    if not entry.fixed_in:
        return None, None
    per = entry.url or entry.source
    release = release_of(entry.fixed_in)
    if release is None:
        return None, (f"fixed in {entry.fixed_in} per {per}: a PR or commit, not a release, "
                      "so it cannot be compared with the installed one")
    dist, fixed = release
    have = installed(dist)
    if have is None:
        return None, f"fixed in {entry.fixed_in}: {dist} is not installed here to compare"
    wheel, version = have
    if version >= fixed:
        return (f"fixed in {entry.fixed_in} per {per}, reproduces on {wheel} {version}",
                f"{wheel} {version} is at or past {entry.fixed_in}: a regression")
    return None, f"fixed in {entry.fixed_in}, after the installed {wheel} {version}"


def regressions(rows, entries=None, issues=None) -> list[str]:
    """One line per atlas entry (``entries``, default the built-in atlas) flagged as a
    regression by a row of compare that shows its bug: the entry's own backend, case and
    dtype, or a known issue (``issues``, default the built-in table) naming the entry."""
    entries = load_atlas() if entries is None else tuple(entries)
    by_id = {e.id: e for e in entries}
    shown: dict[str, list[str]] = {}
    for r in rows:
        if r.get("status") not in _SHOWS:
            continue
        key = (r.get("backend"), r.get("case"), r.get("dtype"))
        ids = [e.id for e in entries if e.case is not None and (e.backend, e.case, e.dtype) == key]
        issue = known_issue(*key, issues)
        ids += [issue.atlas] if issue is not None and issue.atlas in by_id else []
        for eid in dict.fromkeys(ids):
            shown.setdefault(eid, []).append("/".join(map(str, key)))
    out = []
    for eid, seen in shown.items():
        flag, _ = fixed_in_check(by_id[eid])
        if flag:
            out.append(f"{eid}: {flag} (rows {', '.join(dict.fromkeys(seen))})")
    return out
