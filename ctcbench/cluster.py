"""Dask clusters the drivers run their tasks on: the ``--executor``/``--scheduler`` choice,
checked once, and a connected client (``dask.distributed`` is imported only here, and only
when a cluster is asked for)."""
from __future__ import annotations

EXECUTORS = ("local", "dask-local")  # what --executor may name
SCHEDULER_SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")  # Dask's network protocols


def check_executor(kind: str, scheduler: str | None) -> None:
    """ValueError naming ``--executor`` or ``--scheduler`` for an unknown executor, a scheduler
    address with ``--executor dask-local``, or an address Dask cannot take."""
    if kind not in EXECUTORS:
        raise ValueError(f"--executor: expected one of {', '.join(EXECUTORS)}, got {kind!r}")
    if scheduler is not None:
        if kind != "local":
            raise ValueError(f"--scheduler: expected no --executor {kind} with a scheduler "
                             f"address, got {scheduler!r}")
        check_scheduler(scheduler)


def check_scheduler(address: str) -> None:
    """ValueError naming ``--scheduler`` unless ``address`` reads as a Dask scheduler's
    ``[PROTOCOL://]HOST:PORT`` (checked before any work; whether one answers there is seen
    when the client connects)."""
    scheme, sep, rest = address.partition("://")
    if not sep:
        scheme, rest = "tcp", address
    host, _, port = rest.rpartition(":")
    ok = (scheme in SCHEDULER_SCHEMES and host and port.isdigit()
          and not any(c.isspace() or c in "/?#@" for c in host))
    if not ok:
        raise ValueError(f"--scheduler: expected an address like tcp://HOST:8786 "
                         f"({'|'.join(SCHEDULER_SCHEMES)}://HOST:PORT), got {address!r}")


def dask_client(scheduler: str | None = None, local_workers: int | None = None):
    """A connected ``distributed.Client`` and the ``LocalCluster`` it started (or ``None``):
    on the running cluster at ``scheduler``, or on ``local_workers`` worker processes with
    one thread each. The caller closes both."""
    try:
        from distributed import Client, LocalCluster
    except ImportError:
        raise ValueError("executor: expected dask.distributed to be installed, got an "
                         "ImportError (pip install 'ctcbench[dask]')") from None
    if scheduler is not None:
        try:
            return Client(scheduler, timeout="10s"), None
        except (OSError, TimeoutError, ValueError) as exc:  # ValueError: a bad address
            raise ValueError(f"--scheduler: expected a running Dask scheduler, got "
                             f"{scheduler!r} ({exc})") from None
    cluster = LocalCluster(n_workers=local_workers, threads_per_worker=1, processes=True,
                           dashboard_address=None)
    return Client(cluster), cluster
