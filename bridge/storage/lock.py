"""One bridge process per SQLite store: an exclusive `flock` on `<db>.lock`, held while the store is open.

The kernel drops the lock when the process dies however it dies (kill -9 included), so there is never a stale lock to
clean up; the file only records the holder's pid for the error message. The file is never deleted: deleting it while
another process waits on it would let two processes hold locks on two different files.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from bridge.errors import StoreLocked


class ProcessLock:
    def __init__(self, fd: int, path: Path) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def acquire(cls, db_path: Path) -> ProcessLock:
        """Take the lock for `db_path`, or raise `StoreLocked` naming the pid that holds it."""
        path = db_path.with_name(db_path.name + ".lock")
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = os.read(fd, 32).decode(errors="replace").strip()
            os.close(fd)
            raise StoreLocked(str(db_path), int(holder) if holder.isdigit() else None) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(fd, path)

    def release(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.ftruncate(fd, 0)
            os.close(fd)  # closing the last descriptor releases the flock
