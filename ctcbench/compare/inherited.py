"""What a row owes to the framework under it, said in the row.

* A built-in adapter that hands its framework logit 0 on padded frames instead of what the
  case holds there (the trait ``clears_padded_frames``) passes a NaN-padding case whatever its
  framework would do: the rows of those cases say so (:func:`padding_note`).
* A ``--function`` that wraps a framework inherits what that framework is known to get wrong.
  A failing row of a function is *inherited* when, on that case, (1) the framework is known
  to fail: a known issue of its built-in backend (``cases/known_issues.toml``), an atlas entry
  of it (``cases/atlas.toml``) tried on that case or by a probe whose input the case holds, a
  problem its built-in adapter refuses or clears the padding of; and (2) the framework's own
  call (the built-in backend's ``raw_ctc``) gives the function's losses and gradients on the
  case's problems, within the case's tolerances, NaN where NaN. The row then says "same as
  torch's F.ctc_loss: <what is known> (<where>)"; with ``accept`` naming the framework
  (``--accept-known torch``) it is ``known`` and does not fail the gate.
* A torch-convention function that scores an infeasible target 0 where the answer is inf
  has torch's ``zero_infinity=True`` convention: a setting, not a bug of torch's, said as such
  and never accepted (an implementer who means it lists the cases in ``--known-issues``).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ctcbench.caselib.known import known_issue, load_atlas
from ctcbench.runtime.function_backend import convention_in
from ctcbench.runtime.protocol import UnsupportedProblem
from ctcbench.runtime.registry import get_backend
from ctcbench.runtime.status import Status


@dataclass(frozen=True)
class Framework:
    """A framework a function may wrap: ``name``, its built-in backend (``--accept-known
    NAME``), whose ``raw_ctc`` is the framework's own call; ``call``, as its users write it;
    ``conventions``, the ``--function`` conventions whose functions are held against it
    without being asked (others only when ``--accept-known`` names it)."""

    name: str
    call: str
    conventions: tuple[str, ...] = ()
    zero_infinity: bool = False  # its call has torch's zero_infinity: held against both


FRAMEWORKS = {f.name: f for f in (
    Framework("torch", "torch's F.ctc_loss", ("torch",), zero_infinity=True),
    Framework("optax", "optax's optax.ctc_loss", ("optax",)),
    Framework("keras-jax", "keras.ops.ctc_loss on JAX", ("keras",)),
    Framework("keras-tf", "keras.ops.ctc_loss on TensorFlow", ("keras",)),
    Framework("keras-torch", "keras.ops.ctc_loss on torch", ("keras",)),
    Framework("tf", "tf.nn.ctc_loss"),
    Framework("warpctc", "paddle's warp-ctc (paddle.nn.functional.ctc_loss)"),
    Framework("mindspore", "mindspore.ops.ctc_loss"),
)}

# an atlas probe (ctcbench.runtime.malformed) -> whether a valid problem holds its input
FEATURES = {
    "target longer than input": lambda p: bool((~p.feasible()).any()),
    "repeats need more frames": lambda p: bool((~p.feasible()).any()),
    "-inf in a valid frame": lambda p: bool(np.isneginf(p.logits[p.frame_mask]).any()),
    "empty target": lambda p: bool((p.target_lengths == 0).any()),
    "empty input and target": lambda p: bool(((p.input_lengths == 0)
                                              & (p.target_lengths == 0)).any()),
    "blank last": lambda p: p.shape[2] > 1 and p.blank == p.shape[2] - 1,
    "float64 logits": lambda p: p.dtype == "float64",
    "float16 logits": lambda p: p.dtype == "float16",
}
INFEASIBLE = ("target longer than input", "repeats need more frames")  # what zero_infinity hides


def padded_values(problem) -> bool:
    """Whether a padded frame of ``problem`` holds anything but 0."""
    padded = problem.logits[~problem.frame_mask]  # (padded frames, C)
    return bool(padded.size) and not bool((padded == 0).all())


def padding_note(backend, prep) -> str | None:
    """The note of a row whose backend clears padded frames on a case that puts values there."""
    if not backend.traits.clears_padded_frames or not any(map(padded_values, prep.problems)):
        return None
    return (f"note: {backend.name}'s adapter hands its framework logit 0 on padded frames, "
            f"so the case's values there never reach it")


class Inheritance:
    """The known issues ``--function`` rows inherit, for one compare run; ``accept``: the
    frameworks whose known issues the functions' rows may have (``--accept-known``). The
    frameworks' built-in backends are loaded on first use and closed by :meth:`close`."""

    def __init__(self, accept=()):
        self.accept = tuple(accept)
        self.backends: dict[str, object] = {}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self) -> None:
        for backend in self.backends.values():
            if backend is not None:
                backend.close()
        self.backends.clear()

    def __call__(self, row: dict, backend, prep, *, function: bool) -> dict:
        """``row`` of ``backend`` on ``prep`` with what it owes its framework said: the
        padding note, and for a ``--function`` backend what it inherits."""
        row = self.row(row, backend, prep) if function else row
        note = padding_note(backend, prep)
        return {**row, "reason": "; ".join(filter(None, [row.get("reason"), note]))} if note \
            else row

    def row(self, row: dict, function, prep) -> dict:
        """``row`` of the function backend ``function`` on ``prep``, said as inherited where
        it is (see the module); any other row as it is."""
        if row.get("status") != Status.MISMATCH:
            return row
        try:
            runs = [(p, function.run(p)) for v, p in zip(prep.variants, prep.problems)
                    if not v.run_kwargs]
        except Exception:  # it failed the row already; no second opinion then
            return row
        if not runs:
            return row
        convention = convention_in(runs[0][1].notes, function.name)
        zero = zero_infinity(convention, prep, runs)
        for fw in FRAMEWORKS.values():
            if convention not in fw.conventions and fw.name not in self.accept:
                continue
            claims = self._claims(fw, prep, runs)
            setting = self._same(fw, prep, runs) if claims else None
            if setting is None:
                continue
            if setting:  # zero_infinity=True: no infeasible target shows what it is known
                # for, and a refusal may be of what the setting hides: atlas entries only
                claims = [(why, where, probe) for why, where, probe in claims
                          if probe is not None and probe not in INFEASIBLE]
            if not claims:
                continue
            said = (f"same as {fw.call}{f' with {setting}' if setting else ''}: "
                    + "; also ".join(f"{why} ({where})" for why, where, _ in claims[:2]))
            if fw.name in self.accept and not zero:
                return {**row, "status": Status.KNOWN,
                        "reason": f"known mismatch: {said} | {row.get('reason') or ''}"}
            said += f"; and {zero}" if zero else f"; --accept-known {fw.name} accepts it"
            return {**row, "reason": f"{said} | {row.get('reason') or ''}"}
        return {**row, "reason": f"{zero} | {row.get('reason') or ''}"} if zero else row

    def _backend(self, name: str):
        if name not in self.backends:
            try:
                self.backends[name] = get_backend(name)
            except Exception:  # not installed here: nothing to hold the function against
                self.backends[name] = None
        return self.backends[name]

    def _claims(self, fw: Framework, prep, runs) -> list[tuple[str, str, str | None]]:
        """``(what is known, where, the atlas probe that shows it or None)`` of each thing
        ``fw`` is known to get wrong on the case."""
        case, dtype = prep.case.name, prep.dtype
        claims = []
        issue = known_issue(fw.name, case, dtype)
        entries = {e.id: e for e in load_atlas()}
        if issue is not None:
            entry = entries.get(issue.atlas)
            where = issue.url or (entry.url if entry is not None else None)
            claims.append((issue.reason, where or (f"docs/atlas.md: {issue.atlas}" if issue.atlas
                                                   else "cases/known_issues.toml"), None))
        for e in entries.values():
            if e.backend != fw.name or (issue is not None and e.id == issue.atlas):
                continue
            if (e.case, e.dtype) == (case, dtype) or (
                    e.probe in FEATURES and any(FEATURES[e.probe](p) for p, _ in runs)
                    and _shows(e.shows, [r for _, r in runs])):
                claims.append((e.problem, e.url or f"docs/atlas.md: {e.id}", e.probe))
        if claims:
            return claims
        backend = self._backend(fw.name)
        if backend is None:
            return []
        if backend.traits.clears_padded_frames and self._padding_matters(backend, prep, runs):
            claims.append(("what the case puts in padded frames reaches its loss or gradient",
                           f"ctcbench's {fw.name} adapter hands it logit 0 there, "
                           "clears_padded_frames; no upstream issue on record", None))
        dtypes = backend.traits.dtypes
        try:
            if dtypes is None or runs[0][0].dtype in dtypes:  # a dtype it lacks is no bug
                backend.run(runs[0][0])
        except UnsupportedProblem as exc:
            claims.append((str(exc), f"ctcbench's {fw.name} backend refuses such problems",
                           None))
        except Exception:
            pass
        return claims

    def _padding_matters(self, backend, prep, runs) -> bool:
        """Whether the framework's own call answers otherwise on a problem whose padded frames
        hold values than with logit 0 there, as its adapter hands it."""
        tol = prep.case.tolerance(prep.dtype)
        for problem, _ in runs:
            if not padded_values(problem):
                continue
            raw = _raw(backend, problem)
            cleared = _raw(backend, problem, problem.clean_logits(np.array(problem.logits).dtype))
            if raw is not None and cleared is not None and not _alike(
                    _Result(*cleared), raw, tol):
                return True
        return False

    def _same(self, fw: Framework, prep, runs) -> str | None:
        """Whether ``fw``'s own call gives the function's results on every problem run:
        ``""`` as it is, ``"zero_infinity=True"`` with that setting (torch's), None if not."""
        backend = self._backend(fw.name)
        if backend is None or not backend.traits.has_raw_ctc:
            return None
        tol = prep.case.tolerance(prep.dtype)
        settings = {"": lambda r: r, **({"zero_infinity=True": _zero_infinity}
                                         if fw.zero_infinity else {})}
        for problem, mine in runs:
            raw = _raw(backend, problem)
            if raw is None:
                return None
            settings = {name: how for name, how in settings.items()
                        if _alike(mine, how(raw), tol)}
        return next(iter(settings), None)


def _raw(backend, problem, logits=None) -> tuple[np.ndarray, np.ndarray] | None:
    """``(loss, grad)`` of the framework's own call (``raw_ctc``) on ``problem`` as the case
    holds it (on ``logits`` instead, where given), or None where it raised or gave no
    gradient."""
    if problem.dtype == "bfloat16":  # NumPy holds it as float32: no raw call takes it
        return None
    logits = np.array(problem.logits) if logits is None else logits
    try:
        raw = backend.raw_ctc(logits, problem.targets.astype(problem.index_dtype),
                              problem.input_lengths.astype(problem.index_dtype),
                              problem.target_lengths.astype(problem.index_dtype),
                              blank=problem.blank)
    except Exception:
        return None
    if raw.outcome != "returned" or raw.grad_logits is None:
        return None
    return raw.loss, raw.grad_logits


def _zero_infinity(raw):
    """``(loss, grad)`` of a call as ``zero_infinity=True`` makes it: an infinite loss 0, and
    its sample's gradient 0."""
    loss, grad = (np.asarray(x, np.float64) for x in raw)
    inf = np.isinf(loss)
    return np.where(inf, 0.0, loss), np.where(inf[None, :, None], 0.0, grad)


@dataclass(frozen=True)
class _Result:
    loss: np.ndarray
    grad_logits: np.ndarray


def _alike(result, raw, tol) -> bool:
    """Whether a ``result`` (``.loss``, ``.grad_logits``) and a ``(loss, grad)`` pair agree
    within ``tol``."""
    loss, grad = raw
    return (_close(result.loss, loss, tol.loss_atol, tol.loss_rtol)
            and _close(result.grad_logits, grad, tol.grad_atol, tol.grad_rtol))


def zero_infinity(convention: str | None, prep, runs) -> str | None:
    """What a torch-convention function's row says when it scores each infeasible sample 0
    (no gradient) where the answer is inf, as torch's ``zero_infinity=True`` does."""
    if convention != "torch":
        return None
    found = 0
    for (problem, mine), answer in zip(runs, [a for v, a in zip(prep.variants, prep.answers)
                                              if not v.run_kwargs]):
        infeasible = np.isposinf(answer.loss)
        if not (np.asarray(mine.loss)[infeasible] == 0).all():
            return None
        found += int(infeasible.sum())
    if not found:
        return None
    return ("torch's zero_infinity=True convention: a target with no path scores 0, where the "
            "answer is inf; a setting of torch's, not a bug (list these cases in your "
            "--known-issues file if you mean it)")


def _shows(signs, results) -> bool:
    """Whether the function's ``results`` show one of an atlas entry's ``signs``: a NaN in
    the gradient, or wrong values (the row failed); a crash, a hang or an error is no
    result."""
    if signs is None:
        return True
    nan = any(np.isnan(r.grad_logits).any() for r in results)
    return "returns garbage" in signs or ("gradient nan" in signs and nan)


def _close(got, want, atol: float, rtol: float) -> bool:
    """``got`` and ``want`` alike: the same shape, NaN and each infinity in the same places,
    the finite entries within ``atol + rtol * |want|``."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    if got.shape != want.shape:
        return False
    if not (np.array_equal(np.isnan(got), np.isnan(want))
            and np.array_equal(np.isposinf(got), np.isposinf(want))
            and np.array_equal(np.isneginf(got), np.isneginf(want))):
        return False
    finite = np.isfinite(want)
    return bool((np.abs(got[finite] - want[finite]) <= atol + rtol * np.abs(want[finite])).all())
