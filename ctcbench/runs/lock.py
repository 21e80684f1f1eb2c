"""One writer per run folder: an OS file lock (``fcntl.flock``) on ``<run folder>/run.lock``.

The lock is held for the whole run and released by the OS when the process ends, however it
ends, so a folder left by a killed run is simply taken over; a clean end removes the file. The file also records who holds
it (pid, host, start time, command): a second writer is refused with that holder named, and
a run that takes over a folder whose last holder died says whose lock it took.
"""
from __future__ import annotations

import datetime as _dt
import fcntl
import json
import os
import shlex
import socket
import sys
from pathlib import Path

LOCK_NAME = "run.lock"


def describe_holder(info: dict) -> str:
    """'pid 123 on host h since 2024-01-01T00:00:00Z (ctcbench compare ...)'."""
    if not info:
        return "another process (it has not recorded itself yet)"
    return (f"pid {info.get('pid')} on host {info.get('host')} since {info.get('started')} "
            f"({info.get('command')})")


def _read_holder(fd: int) -> dict:
    os.lseek(fd, 0, os.SEEK_SET)
    data = b""
    while chunk := os.read(fd, 65536):
        data += chunk
    try:
        info = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return {}
    return info if isinstance(info, dict) else {}


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    own = os.fstat(fd)
    return (own.st_dev, own.st_ino) == (st.st_dev, st.st_ino)


def _in_use(run_dir: Path, holder: dict) -> ValueError:
    return ValueError(f"--out: expected a run folder no other process is writing, got "
                      f"{str(run_dir)!r}, which is in use by {describe_holder(holder)}; wait "
                      f"for it to finish or choose another folder")


def check_free(run_dir: Path) -> None:
    """The ValueError ``RunLock.acquire`` would raise when another process holds the folder's
    lock, said before any slow work; takes nothing (a shared lock, tried and let go)."""
    try:
        fd = os.open(Path(run_dir) / LOCK_NAME, os.O_RDONLY)
    except FileNotFoundError:
        return
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        fcntl.flock(fd, fcntl.LOCK_UN)
    except BlockingIOError:
        raise _in_use(Path(run_dir), _read_holder(fd)) from None
    finally:
        os.close(fd)


class RunLock:
    """The lock of one run folder, held from ``acquire`` to ``release`` (or process end).

    ``taken_over`` is the holder a dead process left recorded (empty when the folder was
    free); ``acquire`` raises ValueError naming the folder and the live holder when another
    process holds it.
    """

    def __init__(self, run_dir: Path, *, command: str | None = None):
        self.path = Path(run_dir) / LOCK_NAME
        self.command = command or shlex.join(["ctcbench", *sys.argv[1:]])
        self.fd: int | None = None
        self.taken_over: dict = {}

    def acquire(self) -> "RunLock":
        while True:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = _read_holder(fd)
                os.close(fd)
                raise _in_use(self.path.parent, holder) from None
            # a holder that ended cleanly unlinked the file we opened: lock the new one
            if _same_file(fd, self.path):
                break
            os.close(fd)
        # a record left in an unlocked file is that of a process that died holding it
        self.taken_over = _read_holder(fd)
        me = {"pid": os.getpid(), "host": socket.gethostname(),
              "started": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
              "command": self.command}
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(me) + "\n").encode("utf-8"), 0)
        os.fsync(fd)
        self.fd = fd
        return self

    def release(self) -> None:
        """Remove the file while still holding it (a clean end leaves nothing behind, and
        nothing to take over), then unlock."""
        if self.fd is None:
            return
        try:
            if _same_file(self.fd, self.path):
                os.unlink(self.path)
        finally:
            fcntl.flock(self.fd, fcntl.LOCK_UN)
            os.close(self.fd)
            self.fd = None
