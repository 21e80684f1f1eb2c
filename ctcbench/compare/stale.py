"""Known issues that no longer reproduce: a row that passes although a known issue claims it
(``cases/known_issues.toml``, a plugin's ``known_issues``, or ``--known-issues`` for a
``--function``). The gate does not fail on it (an upstream fix is good news), but it is said,
so a list of known failures cannot go stale silently."""
from __future__ import annotations

from ctcbench.compare.checks import known_reason
from ctcbench.runtime.status import Status


def stale_known_issues(rows, backends, versions: dict) -> list[str]:
    """One line per passing row a known issue claims, with the claim and the releases it
    passed on. ``backends``: the loaded backends by name; ``versions``: backend ->
    {distribution: version}."""
    out = []
    for r in rows:
        backend = backends.get(r.get("backend"))
        if r.get("status") != Status.OK or backend is None:
            continue
        why = known_reason(backend, r["case"], r["dtype"])
        if why is None:
            continue
        on = ", ".join(f"{d} {v}" for d, v in versions.get(r["backend"], {}).items()
                       if d != "ctcbench")
        out.append(f"{r['backend']}/{r['case']}/{r['dtype']}: listed as known ({why}) but "
                   f"passes" + (f" on {on}" if on else ""))
    return out
