"""A throwaway PostgreSQL cluster for the Postgres store tests and benches.

Debian's server binaries (`scripts/install-postgres.sh` installs the `postgresql` package) run from a temporary
folder: `initdb` makes a cluster there, the server listens only on a Unix socket in that folder (no TCP port, so
concurrent test runs never collide), and everything is removed on exit. `initdb` refuses to run as root, so when the
tests run as root the cluster belongs to the `postgres` account the Debian package creates (or `nobody` without it);
the temporary folder is made under /tmp and handed to that account, since pytest's own temporary folders are private
to root.

Standard library only, so a bench or a script can use it too.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from types import TracebackType
from typing import Self

SUPERUSER = "bridge"
PORT = 5432  # only names the socket file; the socket lives in the cluster's own folder
START_TIMEOUT = 60


class PostgresUnavailable(RuntimeError):
    """The server binaries are not installed; the message says how to get them."""


def find_bindir() -> Path:
    """Where `initdb`, `pg_ctl` and `postgres` are: $PG_BINDIR, the newest /usr/lib/postgresql/N/bin, or PATH."""
    if env := os.environ.get("PG_BINDIR"):
        return Path(env)
    versions = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parent.parent.name)
                      if p.parent.parent.name.isdigit() else 0)
    if versions:
        return versions[-1].parent
    found = shutil.which("initdb")
    if found:
        return Path(found).resolve().parent
    raise PostgresUnavailable("PostgreSQL server binaries (initdb) are not installed: run scripts/install-postgres.sh "
                              "as root, or `apt-get install postgresql`, or set PG_BINDIR")


def _run_as() -> pwd.struct_passwd | None:
    """The account to run the server as: None (ourselves) unless we are root, which initdb refuses."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            return pwd.getpwnam(name)
        except KeyError:
            continue
    raise PostgresUnavailable("running as root and neither a `postgres` nor a `nobody` account exists to run "
                              "PostgreSQL as")


class PostgresCluster:
    """`with PostgresCluster() as pg:` a running server; `pg.create_database()` a fresh database's URL."""

    def __init__(self, *, fsync: bool = False) -> None:
        self.bindir = find_bindir()
        self.fsync = fsync
        self.dir = Path(tempfile.mkdtemp(prefix="mcp-bridge-pg-"))
        self.data = self.dir / "data"
        self.log = self.dir / "server.log"
        self._user = _run_as()
        self._started = False

    # -- lifecycle -------------------------------------------------------------------------------------------------

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def start(self) -> None:
        if self._user is not None:
            os.chown(self.dir, self._user.pw_uid, self._user.pw_gid)
        self._run("initdb", "-D", str(self.data), "-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-sync",
                  "--no-instructions")
        options = (f"-k {self.dir} -p {PORT} -c listen_addresses='' -c fsync={'on' if self.fsync else 'off'}"
                   " -c max_connections=200 -c shared_buffers=32MB")
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.log), "-w", "-t", str(START_TIMEOUT), "-o", options,
                  "start")
        self._started = True

    def close(self) -> None:
        if self._started:
            self._started = False
            self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop", check=False)
        shutil.rmtree(self.dir, ignore_errors=True)

    def _run(self, tool: str, *args: str, check: bool = True) -> None:
        user = self._user
        proc = subprocess.run([str(self.bindir / tool), *args], capture_output=True, text=True, cwd=self.dir,
                              check=False, user=user.pw_uid if user else None, group=user.pw_gid if user else None,
                              extra_groups=[] if user else None)
        if check and proc.returncode != 0:
            log = self.log.read_text(errors="replace")[-2000:] if self.log.exists() else ""
            raise RuntimeError(f"{tool} failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}\n{log}")

    # -- databases -------------------------------------------------------------------------------------------------

    def url(self, database: str = "postgres") -> str:
        """A libpq URL for `database`, over the cluster's Unix socket."""
        return f"postgresql://{SUPERUSER}@/{database}?host={self.dir}&port={PORT}"

    def psql(self, sql: str, database: str = "postgres") -> str:
        """Run SQL through psql (as ourselves: the socket folder is ours or we are root)."""
        proc = subprocess.run([str(self.bindir / "psql"), "-X", "-q", "-t", "-A", "-v", "ON_ERROR_STOP=1",
                               "-d", self.url(database), "-c", sql], capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            raise RuntimeError(f"psql failed: {proc.stderr.strip()}")
        return proc.stdout.strip()

    def create_database(self) -> str:
        """A new empty database; its URL."""
        name = f"t_{uuid.uuid4().hex[:16]}"
        self.psql(f"CREATE DATABASE {name}")
        return self.url(name)

    def drop_database(self, url: str) -> None:
        name = url.split("@/", 1)[1].split("?", 1)[0]
        self.psql(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)")


def store_location(engine: str, sqlite_file: Path, cluster: Callable[[], PostgresCluster]) -> Iterator[str]:
    """Where a test's store on `engine` lives: `sqlite_file`, or a fresh database in `cluster()` (asked for only on
    Postgres, so a SQLite test never starts one), dropped afterwards."""
    if engine == "sqlite":
        yield str(sqlite_file)
        return
    postgres = cluster()
    url = postgres.create_database()
    yield url
    postgres.drop_database(url)
