"""A real Synapse homeserver for the Matrix integration tests.

Synapse lives in its own virtual environment (``<repo>/.cache/synapse-venv``) so its
pinned dependencies never meet the project's. :func:`ensure_synapse_venv` creates it
(idempotent, serialised across processes with ``fcntl.flock``); :class:`Synapse`
generates a test config (loopback only, SQLite, rate limits raised, shared-secret
registration), runs the server as a subprocess and stops it again.

Run as a script (``python tests/harness/synapse.py install``) it only creates the
venv; ``scripts/install-synapse.sh`` does that so the install time stays out of tests.
This module imports nothing outside the standard library at import time, so that
script works with any Python >= 3.10.
"""

from __future__ import annotations

import fcntl
import hashlib
import hmac
import json
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
import venv
from pathlib import Path
from types import TracebackType
from typing import Any, NamedTuple, Self

SYNAPSE_VERSION = "1.163.2"
SHARED_SECRET = "mcp-chat-bridge-test-shared-secret"
STARTUP_TIMEOUT = 90.0

# Every rate limit that a test suite can trip (the defaults allow e.g. 5 logins, then a
# 5.5-minute M_LIMIT_EXCEEDED, which nio's default config retries silently).
_UNLIMITED = {"per_second": 9999, "burst_count": 9999}
_RATE_LIMIT_OVERRIDES: dict[str, Any] = {
    "rc_message": _UNLIMITED,
    "rc_registration": _UNLIMITED,
    "rc_registration_token_validity": _UNLIMITED,
    "rc_login": {"address": _UNLIMITED, "account": _UNLIMITED, "failed_attempts": _UNLIMITED},
    "rc_joins": {"local": _UNLIMITED, "remote": _UNLIMITED},
    "rc_joins_per_room": _UNLIMITED,
    "rc_invites": {"per_room": _UNLIMITED, "per_user": _UNLIMITED, "per_issuer": _UNLIMITED},
    "rc_room_creation": _UNLIMITED,
    "rc_presence": {"per_user": _UNLIMITED},
    "rc_key_requests": _UNLIMITED,
    "rc_3pid_validation": _UNLIMITED,
    "rc_admin_redaction": _UNLIMITED,
    "rc_media_create": _UNLIMITED,
    "rc_delayed_event_mgmt": _UNLIMITED,
    "rc_reports": _UNLIMITED,
    "rc_third_party_invite": _UNLIMITED,
    "rc_user_directory": _UNLIMITED,
    "rc_profile": _UNLIMITED,
}


class SynapseError(RuntimeError):
    """Synapse could not be installed, started or asked something."""


class RegisteredUser(NamedTuple):
    """A user made through the shared-secret admin API; unpacks as (user_id, token, device)."""

    user_id: str
    access_token: str
    device_id: str


# --------------------------------------------------------------------------- install


def repo_root() -> Path:
    """The directory holding pyproject.toml above this file (tests/harness/ sits two below)."""
    here = Path(__file__).resolve().parent
    for candidate in (here, *here.parents):
        if (candidate / "pyproject.toml").is_file():
            return candidate
    return here.parents[1]


def default_venv_dir() -> Path:
    return repo_root() / ".cache" / "synapse-venv"


def _venv_python(venv_dir: Path) -> Path:
    return venv_dir / "bin" / "python"


def ensure_synapse_venv(venv_dir: Path | None = None) -> Path:
    """Create the Synapse venv if needed and return its interpreter.

    A marker file written after a successful install makes this idempotent; an exclusive
    flock on a sibling lock file makes concurrent callers wait for the first one instead
    of installing into the same directory at once. A half-built venv (no marker, e.g.
    after an interrupted install) is removed and rebuilt.
    """
    venv_dir = venv_dir or default_venv_dir()
    python = _venv_python(venv_dir)
    marker = venv_dir / ".installed"
    if marker.is_file() and marker.read_text().strip() == SYNAPSE_VERSION:
        return python
    venv_dir.parent.mkdir(parents=True, exist_ok=True)
    with open(venv_dir.parent / f"{venv_dir.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if marker.is_file() and marker.read_text().strip() == SYNAPSE_VERSION:
            return python  # another process finished while we waited
        if venv_dir.exists():
            shutil.rmtree(venv_dir)
        venv.create(venv_dir, with_pip=True)
        pip = [str(python), "-m", "pip", "install", "--disable-pip-version-check", "--quiet"]
        result = subprocess.run(
            [*pip, f"matrix-synapse=={SYNAPSE_VERSION}"],
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise SynapseError(f"pip install matrix-synapse=={SYNAPSE_VERSION} failed:\n{result.stdout}{result.stderr}")
        marker.write_text(SYNAPSE_VERSION + "\n")
    return python


# --------------------------------------------------------------------------- HTTP


# Loopback only: never let an http_proxy from the environment see these requests.
_opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def _http_json(method: str, url: str, body: dict[str, Any] | None = None) -> dict[str, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with _opener.open(request, timeout=30) as response:
            result: dict[str, Any] = json.load(response)
    except urllib.error.HTTPError as err:
        raise SynapseError(f"{method} {url} -> {err.code}: {err.read().decode(errors='replace')}") from err
    return result


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def registration_mac(shared_secret: str, nonce: str, username: str, password: str, *, admin: bool) -> str:
    """HMAC-SHA1 over nonce, user, password and admin flag, NUL-separated (Synapse admin register API)."""
    message = "\x00".join((nonce, username, password, "admin" if admin else "notadmin"))
    return hmac.new(shared_secret.encode(), message.encode(), hashlib.sha1).hexdigest()


# --------------------------------------------------------------------------- server


class Synapse:
    """A Synapse homeserver on 127.0.0.1 for the duration of a ``with`` block.

    ``workdir`` holds the config, signing key, SQLite database and logs; it defaults to
    a fresh temporary directory that is removed on exit (a caller-provided one is kept,
    e.g. pytest's ``tmp_path_factory`` so logs survive a failed run).
    """

    def __init__(
        self,
        workdir: Path | None = None,
        *,
        venv_dir: Path | None = None,
        server_name: str = "localhost",
        startup_timeout: float = STARTUP_TIMEOUT,
    ) -> None:
        self._own_workdir = workdir is None
        self.workdir = Path(workdir) if workdir is not None else Path(tempfile.mkdtemp(prefix="synapse-"))
        self.venv_dir = venv_dir or default_venv_dir()
        self.server_name = server_name
        self.startup_timeout = startup_timeout
        self.config_path = self.workdir / "homeserver.yaml"
        self.log_path = self.workdir / "homeserver.log"
        self.stdout_path = self.workdir / "synapse.stdout.log"
        self.port = 0
        self.base_url = ""
        self._process: subprocess.Popen[bytes] | None = None

    # -- lifecycle

    def __enter__(self) -> Self:
        try:
            self.start()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        python = ensure_synapse_venv(self.venv_dir)
        generated = self._generate_config(python)
        # The free port is only reserved until we close the probe socket; retry if another
        # process grabs it before Synapse binds.
        for attempt in range(3):
            self.port = _free_port()
            self.base_url = f"http://127.0.0.1:{self.port}"
            self._write_config(generated)
            self._spawn(python)
            try:
                self._wait_until_ready()
                return
            except SynapseError:
                exited = self._process is not None and self._process.poll() is not None
                if attempt < 2 and exited and "Address already in use" in self.log_tail():
                    self._terminate()
                    continue
                raise

    def stop(self) -> None:
        self._terminate()
        if self._own_workdir:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def _terminate(self) -> None:
        process, self._process = self._process, None
        if process is None:
            return
        if process.poll() is None:
            process.terminate()
            try:
                process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    # -- config

    def _generate_config(self, python: Path) -> str:
        self.workdir.mkdir(parents=True, exist_ok=True)
        result = subprocess.run(
            [
                str(python),
                "-m",
                "synapse.app.homeserver",
                "--server-name",
                self.server_name,
                "--config-path",
                str(self.config_path),
                "--data-directory",
                str(self.workdir),
                "--generate-config",
                "--report-stats=no",
            ],
            cwd=self.workdir,
            capture_output=True,
            text=True,
            check=False,
        )
        if result.returncode != 0:
            raise SynapseError(f"synapse --generate-config failed:\n{result.stdout}{result.stderr}")
        return self.config_path.read_text()

    def _write_config(self, generated: str) -> None:
        """Apply the test overrides to the generated config (keeping its keys and secrets)."""
        import yaml  # imported here so `install` runs on a bare python3 without PyYAML

        config: dict[str, Any] = yaml.safe_load(generated)
        config.update(_RATE_LIMIT_OVERRIDES)
        config.update(
            {
                "server_name": self.server_name,
                "public_baseurl": f"{self.base_url}/",
                # client (+ admin) API only: no federation listener, no ::1.
                "listeners": [
                    {
                        "port": self.port,
                        "bind_addresses": ["127.0.0.1"],
                        "type": "http",
                        "tls": False,
                        "x_forwarded": False,
                        "resources": [{"names": ["client"], "compress": False}],
                    }
                ],
                "database": {
                    "name": "sqlite3",
                    "args": {"database": str(self.workdir / "homeserver.db")},
                },
                "pid_file": str(self.workdir / "homeserver.pid"),
                "media_store_path": str(self.workdir / "media_store"),
                "report_stats": False,
                "trusted_key_servers": [],  # the default (matrix.org) would go to the network
                "suppress_key_server_warning": True,
                "federation_domain_whitelist": [],
                "registration_shared_secret": SHARED_SECRET,
                "enable_registration": False,
                "bcrypt_rounds": 4,  # default 12 makes every login slow
                "presence": {"enabled": False},
                "url_preview_enabled": False,
                "enable_metrics": False,
                # default 2 min: a retried identical /sync would get a cached answer
                "caches": {"sync_response_cache_duration": 0},
            }
        )
        self.config_path.write_text(yaml.safe_dump(config, sort_keys=False))

        # Unbuffered logging into the workdir: the generated config buffers INFO lines in
        # memory, so a failing test would not see the server's latest lines.
        log_config_path = Path(config["log_config"])
        log_config: dict[str, Any] = yaml.safe_load(log_config_path.read_text())
        log_config["handlers"]["file"]["filename"] = str(self.log_path)
        log_config["root"]["handlers"] = ["file"]
        log_config_path.write_text(yaml.safe_dump(log_config, sort_keys=False))

    # -- process

    def _spawn(self, python: Path) -> None:
        with open(self.stdout_path, "ab") as out:
            self._process = subprocess.Popen(
                [str(python), "-m", "synapse.app.homeserver", "-c", str(self.config_path)],
                cwd=self.workdir,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
            )

    def _wait_until_ready(self) -> None:
        # An external process gives no readiness signal, so poll /versions with short
        # waits, bounded by startup_timeout, failing fast if the process dies.
        deadline = time.monotonic() + self.startup_timeout
        url = f"{self.base_url}/_matrix/client/versions"
        while True:
            process = self._process
            if process is None or process.poll() is not None:
                code = None if process is None else process.returncode
                raise SynapseError(f"Synapse exited during start-up (code {code}):\n{self.log_tail()}")
            try:
                with _opener.open(url, timeout=2) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                pass
            if time.monotonic() > deadline:
                raise SynapseError(
                    f"Synapse did not answer {url} within {self.startup_timeout:g} s:\n{self.log_tail()}"
                )
            time.sleep(0.05)

    def log_tail(self, lines: int = 40) -> str:
        parts = []
        for path in (self.stdout_path, self.log_path):
            if path.is_file():
                tail = path.read_text(errors="replace").splitlines()[-lines:]
                parts.append(f"--- {path} ---\n" + "\n".join(tail))
        return "\n".join(parts) or "(no Synapse logs)"

    # -- API

    def register(self, username: str, password: str, *, admin: bool = False) -> RegisteredUser:
        """Create a user (and a device with a fresh access token) via the shared secret."""
        if not self.base_url:
            raise SynapseError("Synapse is not running")
        url = f"{self.base_url}/_synapse/admin/v1/register"
        nonce = str(_http_json("GET", url)["nonce"])
        reply = _http_json(
            "POST",
            url,
            {
                "nonce": nonce,
                "username": username,
                "password": password,
                "admin": admin,
                "mac": registration_mac(SHARED_SECRET, nonce, username, password, admin=admin),
            },
        )
        return RegisteredUser(str(reply["user_id"]), str(reply["access_token"]), str(reply["device_id"]))


def main(argv: list[str]) -> int:
    if argv[1:] == ["install"]:
        started = time.monotonic()
        python = ensure_synapse_venv()
        print(f"synapse venv ready: {python} ({time.monotonic() - started:.1f} s)")
        return 0
    print(f"usage: {argv[0]} install", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
