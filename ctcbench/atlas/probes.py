"""Atlas entries tried by a probe: the entry's backend's own framework call (``raw_ctc``, in its
worker, where a crash or a hang stays) handed one input of ``ctcbench.runtime.malformed``. The
bug reproduces when the call shows one of the entry's signs (``raises``, ``crashes``,
``hangs``, ``returns sane``/``returns garbage``, ``gradient nan``/``zero``/``nonzero``)."""
from __future__ import annotations

from ctcbench.atlas.kind import Outcome
from ctcbench.runtime.malformed import PROBES, try_malformed, valid_losses, verdict
from ctcbench.runtime.protocol import BackendUnavailable
from ctcbench.runtime.registry import backend_versions, get_backend

TIMEOUT_S = 60.0  # a probe that hangs is stopped here and reported as "hangs"


def signs(row: dict) -> set[str]:
    """What a probe's row shows: its verdict and, where a gradient came back, its kind."""
    return {verdict(row)[0]} | ({f"gradient {row['grad']}"} if row.get("grad") else set())


def try_probes(entries, timeout_s: float = TIMEOUT_S) -> dict[str, tuple[Outcome, str]]:
    """entry id -> (outcome, reason) for entries with a probe, each backend loaded once."""
    by_probe = {p.name: p for p in PROBES}
    out, valid = {}, None
    for name in dict.fromkeys(e.backend for e in entries):
        group = [e for e in entries if e.backend == name]
        try:
            backend = get_backend(name, isolated=True)
        except BackendUnavailable as exc:
            out |= {e.id: (Outcome.CANNOT_TRY, f"{name}: {exc}") for e in group}
            continue
        versions = ", ".join(f"{d} {v}" for d, v in backend_versions([backend])[name].items()
                             if d != "ctcbench")  # the framework's releases, not ours
        valid = valid_losses() if valid is None else valid
        try:
            for e in group:
                row = try_malformed(backend, by_probe[e.probe], timeout_s=timeout_s, valid=valid)
                seen = signs(row)
                said = f"{e.probe}: {', '.join(sorted(seen))} ({row['detail']})"
                if verdict(row)[0] == "not expressible":
                    out[e.id] = (Outcome.CANNOT_TRY, said)
                elif seen & set(e.shows):
                    out[e.id] = (Outcome.REPRODUCES, f"{said} on {versions}")
                else:
                    out[e.id] = (Outcome.FIXED, f"does not reproduce on {versions}: {said}")
        finally:
            backend.close()
    return out
