"""Run a backend in its own long-lived worker process, so a crash or a hang costs one case.

Some frameworks cannot share a process, a native kernel can segfault on a bad problem, and a
framework import or JIT compilation is too slow to repeat per case: so an isolated backend
(``isolated = True``, or ``get_backend(name, isolated=True)``) gets one worker, started on
first use and kept for the run. A worker that dies raises
:class:`~ctcbench.runtime.protocol.BackendCrashed` (``.signal`` or ``.exitcode``), one that
does not answer within ``timeout_s`` is killed and raises
:class:`~ctcbench.runtime.protocol.BackendTimeout`; the next request starts a fresh one.
Exceptions the backend raises come back as themselves or as :class:`WorkerError`.

The protocol (``python -m ctcbench.runtime.worker SPEC NAME``, length-prefixed JSON headers and
``.npz`` arrays over pipes, no pickle; requests ``run``, ``bench``, ``raw``, ``call``) is in
docs/backends-and-plugins.md. This module imports no registry: the worker rebuilds its
backend from ``SPEC`` with :func:`ctcbench.runtime.factory.load_factory`.
"""
from __future__ import annotations

import atexit
import json
import os
import select
import signal
import struct
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Protocol

import numpy as np

from ctcbench.errors import InputError, expect
from ctcbench.runtime.protocol import (
    DEFAULT_STARTUP_TIMEOUT_S,
    DEFAULT_TIMEOUT_S,
    BackendCrashed,
    BackendResult,
    BackendTimeout,
    BackendTraits,
    BackendUnavailable,
    RawOutcome,
    UnsupportedProblem,
    call_raw,
    kernel_call,
)
from ctcbench.runtime.framing import (
    pack,
    problem_frame,
    problem_from_frame,
    read_exact,
    unpack_arrays,
)
from ctcbench.runtime.threads import requested, worker_env
from ctcbench.runtime.timing import CallTimes, between_calls, time_calls


class WorkerError(RuntimeError):
    """An exception raised inside a worker that has no counterpart here."""

    def __init__(self, message: str, remote_traceback: str = ""):
        super().__init__(message)
        self.remote_traceback = remote_traceback


def _error_header(exc: BaseException) -> dict:
    return {"ok": False, "type": type(exc).__name__, "message": str(exc),
            "reason": getattr(exc, "reason", None), "hint": getattr(exc, "hint", None),
            "name": getattr(exc, "name", None) if isinstance(exc, InputError) else None,
            "problem": getattr(exc, "problem", None), "traceback": traceback.format_exc()}


def _raise_remote(header: dict, name: str):
    kind, message = header.get("type"), header.get("message", "")
    if kind == "BackendUnavailable":
        raise BackendUnavailable(header.get("reason") or message, header.get("hint"))
    if kind == "UnsupportedProblem":
        raise UnsupportedProblem(message)
    if header.get("name") and header.get("problem"):  # an InputError: what the user gave
        raise InputError(header["name"], header["problem"])
    if kind in ("ValueError", "TypeError"):
        raise {"ValueError": ValueError, "TypeError": TypeError}[kind](message)
    raise WorkerError(f"backend {name!r} raised {kind}: {message}", header.get("traceback", ""))


# -- the worker process -----------------------------------------------------------------------
def _serve(spec: str, name: str) -> int:
    import faulthandler

    from ctcbench.runtime.factory import load_factory
    from ctcbench.runtime.protocol import as_result

    proto_out = os.fdopen(os.dup(1), "wb", buffering=0)
    os.dup2(2, 1)  # stray prints from frameworks go to stderr, not into the protocol
    proto_in = sys.stdin.buffer
    faulthandler.enable()  # a traceback in the stderr log when the process is killed by a signal

    def send(header, arrays=None):
        proto_out.write(pack(header, arrays))

    try:
        impl = load_factory(spec)()
        traits = BackendTraits.of(impl)
        if traits.prepare is not None:
            traits.prepare()
    except Exception as exc:
        send(_error_header(exc))
        return 1
    send({"ok": True, "pid": os.getpid()})

    stored = None  # the problem of the last "bench" request that carried one
    timed_call = None  # what "bench" times for it (kernel_call), built once per problem
    while True:
        raw = read_exact(proto_in, 4)
        if raw is None:
            return 0  # the parent closed the pipe
        header = json.loads(read_exact(proto_in, struct.unpack(">I", raw)[0]))
        (size,) = struct.unpack(">Q", read_exact(proto_in, 8))
        arrays = unpack_arrays(read_exact(proto_in, size) if size else b"")
        if header["op"] == "raw":  # the arrays as sent, no CTCProblem: see _serve_raw
            send(*_serve_raw(impl, name, header, arrays))
            continue
        if header["op"] == "call":  # a method of the impl: arrays in, JSON out (decoders)
            try:
                value = getattr(impl, header["method"])(**arrays, **header["kwargs"])
                send({"ok": True, "value": value})
            except Exception as exc:
                send(_error_header(exc))
            continue
        try:
            problem = problem_from_frame(header, arrays) if "logits" in arrays else stored
            kwargs = {"grad_weights": arrays["grad_weights"]} if "grad_weights" in arrays else {}
            if kwargs and not traits.takes_grad_weights:
                raise UnsupportedProblem(f"{name}: run() takes no grad_weights (upstream gradient)")
            if header.get("exact_shape") and traits.takes_exact_shape:
                kwargs["exact_shape"] = True
            if header["op"] == "bench":
                if problem is None:
                    raise ValueError("bench request: expected a problem, got none sent or stored")
                if problem is not stored or timed_call is None:
                    stored, timed_call = problem, kernel_call(impl, problem, traits)
                between = between_calls(header.get("between", "nothing"),
                                        problem.logits.nbytes)
                times = time_calls(timed_call, warmup=header["warmup"], repeat=header["repeat"],
                                   number=header.get("number"), between=between)
                send({"ok": True, **times.to_dict()})
                continue
            t0 = time.perf_counter()
            raw_result = impl.run(problem, **kwargs)
            run_s = time.perf_counter() - t0
            result = as_result(raw_result, problem)
        except Exception as exc:
            send(_error_header(exc))
            continue
        send({"ok": True, "compute_dtype": result.compute_dtype, "notes": result.notes,
              "run_s": run_s}, {"loss": result.loss, "grad_logits": result.grad_logits})


def _serve_raw(impl, name: str, header: dict, arrays: dict) -> tuple[dict, dict | None]:
    """The reply to a ``raw`` request: ``impl.raw_ctc`` on the arrays exactly as sent."""
    try:
        out = call_raw(impl, arrays["logits"], arrays["targets"], arrays["input_lengths"],
                       arrays["target_lengths"], blank=header["blank"], name=name)
    except Exception as exc:  # UnsupportedProblem, or the adapter broke the hook's contract
        return _error_header(exc), None
    if out.outcome == "raised":
        return {"ok": True, "outcome": "raised", "type": out.error_type,
                "message": out.message}, None
    returned = {"loss": out.loss}
    if out.grad_logits is not None:
        returned["grad_logits"] = out.grad_logits
    return {"ok": True, "outcome": "returned"}, returned


# -- the parent side --------------------------------------------------------------------------
def _seconds_or_fail(timeout_s) -> None:
    expect(not isinstance(timeout_s, bool) and isinstance(timeout_s, (int, float))
           and 0 < timeout_s < float("inf"), "timeout_s", "a positive finite number of seconds",
           repr(timeout_s))


class _Timeout(Exception):
    pass


class _Died(Exception):
    pass


class _Worker:
    """One worker process and its pipes."""

    def __init__(self, spec: str, name: str, startup_timeout_s: float):
        self.name = name
        self.log = tempfile.TemporaryFile()
        env = dict(os.environ)
        # The child must import what the parent can (e.g. a plugin module found via sys.path).
        env["PYTHONPATH"] = os.pathsep.join(p for p in [*sys.path, env.get("PYTHONPATH", "")] if p)
        self.threads = worker_env(env)  # read by the worker's frameworks at start
        self.proc = subprocess.Popen([sys.executable, "-m", "ctcbench.runtime.worker", spec, name],
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self.log, env=env)
        self.pid = self.proc.pid
        header, _ = self.receive(startup_timeout_s)
        if not header["ok"]:
            self.close()
            _raise_remote(header, name)

    def alive(self) -> bool:
        return self.proc.poll() is None

    def send(self, payload: bytes) -> None:
        try:
            self.proc.stdin.write(payload)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise _Died() from None

    def _read(self, n: int, deadline: float) -> bytes:
        fd = self.proc.stdout.fileno()
        buf = bytearray()
        while len(buf) < n:
            remaining = deadline - time.monotonic()
            if remaining <= 0 or not select.select([fd], [], [], remaining)[0]:
                raise _Timeout()
            chunk = os.read(fd, min(n - len(buf), 1 << 20))
            if not chunk:
                raise _Died()
            buf += chunk
        return bytes(buf)

    def receive(self, timeout_s: float) -> tuple[dict, dict]:
        """The next reply; raises BackendCrashed / BackendTimeout (worker cleaned up)."""
        deadline = time.monotonic() + timeout_s
        try:
            (n,) = struct.unpack(">I", self._read(4, deadline))
            header = json.loads(self._read(n, deadline))
            (size,) = struct.unpack(">Q", self._read(8, deadline))
            blob = self._read(size, deadline) if size else b""
        except _Timeout:
            self.close(kill=True)
            raise BackendTimeout(f"backend {self.name!r} did not answer within {timeout_s:g} s; "
                                 f"its worker (pid {self.pid}) was killed and will be restarted",
                                 timeout_s=timeout_s) from None
        except _Died:
            raise self.crashed() from None
        return header, unpack_arrays(blob)

    def crashed(self) -> BackendCrashed:
        try:
            rc = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:  # closed its pipe but lingers
            self.close(kill=True)
            rc = self.proc.returncode
        sig = signal.Signals(-rc).name if rc is not None and rc < 0 else None
        how = f"signal {sig}" if sig else f"exit code {rc}"
        tail = self.stderr_tail()
        self.close()
        return BackendCrashed(f"backend {self.name!r} worker (pid {self.pid}) died with {how}"
                              + (f"; stderr ends: {tail}" if tail else ""),
                              signal=sig, exitcode=None if sig else rc)

    def stderr_tail(self, lines: int = 3) -> str:
        try:
            self.log.seek(0)
            text = self.log.read().decode(errors="replace")
        except (OSError, ValueError):
            return ""
        kept = [ln.strip() for ln in text.splitlines() if ln.strip()]
        fatal = [i for i, ln in enumerate(kept) if ln.startswith("Fatal Python error")]
        if fatal:  # faulthandler's report: the error, then the innermost frame
            frames = [ln for ln in kept[fatal[-1]:] if ln.startswith("File ")]
            return " | ".join([kept[fatal[-1]], *frames[:1]])
        return " | ".join(kept[-lines:])

    def close(self, *, kill: bool = False) -> None:
        if self.proc.poll() is None:
            if kill:
                self.proc.kill()
            else:
                try:
                    self.proc.stdin.close()  # EOF: the worker's loop returns
                    self.proc.wait(timeout=10)
                except (OSError, subprocess.TimeoutExpired):
                    self.proc.kill()
            self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            try:
                stream.close()
            except OSError:
                pass
        self.log.close()


_workers: dict[tuple[str, str], _Worker] = {}  # (spec, name) -> the live worker


def shutdown_workers() -> None:
    """Stop every worker process this process started."""
    while _workers:
        _, worker = _workers.popitem()
        worker.close()


atexit.register(shutdown_workers)


class WorkerLimits(Protocol):
    """What a worker needs of an implementation's traits, which every kind's traits have
    (``BackendTraits``, the decoders' ``DecoderTraits``)."""

    timeout_s: float  # per call
    startup_timeout_s: float  # spawn, imports, prepare()


class IsolatedBackend:
    """Runs ``spec`` (``"module:attr"``) in a long-lived worker; same ``run`` as any backend,
    and ``call`` for any other method (a decoder's).

    ``limits``: the implementation's traits, for its timeouts (default: the contract's
    defaults). Workers are shared per (spec, name), so asking for the implementation again
    reuses the live worker instead of paying the framework import again.
    """

    def __init__(self, name: str, spec: str, limits: WorkerLimits | None = None):
        self.name = name
        self.spec = spec
        self.timeout_s = limits.timeout_s if limits is not None else DEFAULT_TIMEOUT_S
        self.startup_timeout_s = (limits.startup_timeout_s if limits is not None
                                  else DEFAULT_STARTUP_TIMEOUT_S)

    @property
    def worker_pid(self) -> int | None:
        worker = _workers.get((self.spec, self.name))
        return worker.pid if worker is not None and worker.alive() else None

    def _worker(self) -> _Worker:
        key = (self.spec, self.name)
        worker = _workers.get(key)
        if worker is not None and worker.alive() and worker.threads != requested():
            worker.close()  # started for another thread count (bench --threads 1,2)
        if worker is None or not worker.alive():
            _workers.pop(key, None)
            worker = _workers[key] = _Worker(self.spec, self.name, self.startup_timeout_s)
        return worker

    def _request(self, header: dict, arrays: dict | None, calls: int = 1,
                 timeout_s: float | None = None) -> tuple[dict, dict]:
        """Send one request of ``calls`` calls, return the reply; failures raised as for
        ``run`` (the timeout is ``timeout_s``, default the trait, per call; checked here)."""
        if timeout_s is not None:
            _seconds_or_fail(timeout_s)
        key = (self.spec, self.name)
        try:
            worker = self._worker()
        except Exception:
            _workers.pop(key, None)
            raise
        try:
            worker.send(pack(header, arrays))
            per_call = self.timeout_s if timeout_s is None else timeout_s
            reply, out = worker.receive(per_call * calls)
        except _Died:
            _workers.pop(key, None)
            raise worker.crashed() from None
        except (BackendCrashed, BackendTimeout):
            _workers.pop(key, None)
            raise
        if not reply["ok"]:
            _raise_remote(reply, self.name)
        return reply, out

    def run(self, problem, *, grad_weights=None, timeout_s: float | None = None) -> BackendResult:
        """Run in the worker; ``grad_weights (N,)`` is passed on where the backend takes it;
        no answer within ``timeout_s`` (default the trait) raises BackendTimeout."""
        return self.run_timed(problem, grad_weights=grad_weights, timeout_s=timeout_s)[0]

    def run_timed(self, problem, *, grad_weights=None, exact_shape: bool = False,
                  timeout_s: float | None = None) -> tuple[BackendResult, float, float]:
        """``run``, plus the seconds the call took here (the whole round trip: sending the
        problem, the call, the reply) and inside the worker (the backend's ``run`` alone).
        ``exact_shape`` is passed on to a backend whose ``run`` takes it; ``grad_weights``
        to one whose ``run`` does not is UnsupportedProblem (from the worker)."""
        header, arrays = problem_frame(problem, grad_weights)
        header["exact_shape"] = exact_shape
        t0 = time.perf_counter()
        reply, out = self._request(header, arrays, timeout_s=timeout_s)
        wall_s = time.perf_counter() - t0
        result = BackendResult(out["loss"], out["grad_logits"], reply.get("compute_dtype"),
                               list(reply.get("notes") or []))
        return result, wall_s, float(reply["run_s"])

    def bench(self, problem=None, *, warmup: int = 0, repeat: int = 1,
              number: int | None = None, between: str = "nothing") -> CallTimes:
        """Time the backend inside the worker (:func:`ctcbench.runtime.timing.time_calls` of
        :func:`ctcbench.runtime.protocol.kernel_call`, ``between`` calls as it names):
        ``problem`` is sent once and kept there; ``None`` times the one sent last. The times
        exclude the round trip."""
        if problem is not None:
            header, arrays = problem_frame(problem, None, op="bench")
        else:
            header, arrays = {"op": "bench"}, None
        header.update(warmup=warmup, repeat=repeat, number=number, between=between)
        calls = warmup + (number is None) + repeat * (number or 1)
        reply, _ = self._request(header, arrays, calls=max(calls, 1))
        return CallTimes(reply["first_call_s"], reply["number"], list(reply["times_s"]))

    def raw_ctc(self, logits, targets, input_lengths, target_lengths, *, blank: int = 0,
                timeout_s: float | None = None) -> RawOutcome:
        """The backend's ``raw_ctc`` in the worker, on the arrays exactly as given (no
        CTCProblem is built: they may be malformed on purpose). Returns a
        :class:`~ctcbench.runtime.protocol.RawOutcome`, ``"returned"`` or ``"raised"``; a
        worker that dies raises BackendCrashed (``.signal``), one that does not answer within
        ``timeout_s`` (default the backend's trait) BackendTimeout, and the next request
        starts a fresh worker; UnsupportedProblem where the backend has no ``raw_ctc`` or its
        framework cannot express the input."""
        arrays = {"logits": np.asarray(logits), "targets": np.asarray(targets),
                  "input_lengths": np.asarray(input_lengths),
                  "target_lengths": np.asarray(target_lengths)}
        reply, out = self._request({"op": "raw", "blank": int(blank)}, arrays,
                                   timeout_s=timeout_s)
        if reply["outcome"] == "raised":
            return RawOutcome("raised", error_type=reply["type"], message=reply["message"])
        return RawOutcome("returned", loss=out["loss"], grad_logits=out.get("grad_logits"))

    def call(self, method: str, arrays: dict, *, timeout_s: float | None = None, **kwargs):
        """``impl.method(**arrays, **kwargs)`` in the worker, for an impl that is no CTC
        backend (a decoder): ``arrays`` name -> ndarray, ``kwargs`` JSON values; returns what
        it returned, which must be JSON (lists, numbers, strings)."""
        reply, _ = self._request({"op": "call", "method": method, "kwargs": kwargs},
                                 {k: np.asarray(v) for k, v in arrays.items()},
                                 timeout_s=timeout_s)
        return reply["value"]

    def close(self) -> None:
        worker = _workers.pop((self.spec, self.name), None)
        if worker is not None:
            worker.close()


if __name__ == "__main__":
    sys.exit(_serve(sys.argv[1], sys.argv[2]))
