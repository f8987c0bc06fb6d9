"""Logging in once and staying the same device across restarts.

Every password login makes a new device; with E2EE that means new keys that nobody has seen, and undecryptable
history for the bot. So the first password login's user id, device id and access token are kept in `store_path`
(next to nio's key store) and restored on every later start. The sync token is kept there too, so a restart resumes
where the last run stopped instead of replaying history (nio only stores it itself with E2EE on).
"""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path

import anyio

from adapters.matrix.client import Credentials, LoginLost, MatrixClient, UnknownToken
from adapters.matrix.settings import MatrixSettings
from bridge.errors import PlatformAPIError, RateLimited

logger = logging.getLogger(__name__)

CREDENTIALS = "credentials.json"
SYNC_TOKEN = "sync-token"


def _write_private(path: Path, text: str) -> None:
    """Write atomically and readable by the owner only: the file holds the bot's access token."""
    tmp = path.with_suffix(path.suffix + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as out:
        out.write(text)
    os.replace(tmp, path)


def load_credentials(store: Path) -> Credentials | None:
    try:
        data = json.loads((store / CREDENTIALS).read_text("utf-8"))
        return Credentials(str(data["user_id"]), str(data["device_id"]), str(data["access_token"]))
    except (OSError, ValueError, KeyError, TypeError):
        return None


def save_credentials(store: Path, credentials: Credentials) -> None:
    store.mkdir(parents=True, exist_ok=True)
    _write_private(store / CREDENTIALS, json.dumps({"user_id": credentials.user_id,
                                                     "device_id": credentials.device_id,
                                                     "access_token": credentials.access_token}))


def forget_credentials(store: Path) -> None:
    """Drop the kept login (its token was rejected): the next start logs in afresh instead of reusing it."""
    (store / CREDENTIALS).unlink(missing_ok=True)


def same_user(a: str, b: str) -> bool:
    """Whether two user ids name the same account: localparts compared case-insensitively (logins accept any case
    and answer with the canonical id), and a bare localpart matches any server."""
    local_a, _, server_a = a.removeprefix("@").partition(":")
    local_b, _, server_b = b.removeprefix("@").partition(":")
    same_server = not server_a or not server_b or server_a.lower() == server_b.lower()
    return local_a.lower() == local_b.lower() and same_server


def load_sync_token(store: Path, device_id: str) -> str | None:
    try:
        token = (store / f"{SYNC_TOKEN}-{device_id}").read_text("utf-8").strip()
    except OSError:
        return None
    return token or None


def save_sync_token(store: Path, device_id: str, token: str) -> None:
    _write_private(store / f"{SYNC_TOKEN}-{device_id}", token)


async def log_in(client: MatrixClient, settings: MatrixSettings) -> Credentials:
    """Restore the kept session, or the configured token, or log in with the password once and keep the result."""
    store = settings.store_path
    kept = load_credentials(store)
    if settings.access_token:
        device = settings.device_id or (kept.device_id if kept and kept.access_token == settings.access_token
                                        else "")
        if not device:
            device = await client.whoami(settings.user_id, settings.access_token)
        credentials = Credentials(settings.user_id, device, settings.access_token)
    elif kept is not None and same_user(kept.user_id, settings.user_id):
        credentials = kept
    elif settings.password:
        credentials = await client.login(settings.password, settings.device_name)
        logger.info("logged in as %s, new device %s (kept in %s)", credentials.user_id, credentials.device_id, store)
        save_credentials(store, credentials)
        return credentials  # login() has set up the client (and loaded its key store) already
    else:
        raise PlatformAPIError("matrix", "login", "no access_token, no kept session and no password to log in with")
    save_credentials(store, credentials)
    client.restore_login(credentials)
    return credentials


async def log_in_again(client: MatrixClient, settings: MatrixSettings, rejected: UnknownToken) -> Credentials:
    """The homeserver rejected the token (the device was logged out, or the token revoked). The kept login is
    useless now: forget it, and log in again with the password, or raise `LoginLost` when there is none."""
    forget_credentials(settings.store_path)
    if settings.access_token or not settings.password:
        raise LoginLost(f"matrix: the homeserver rejected the bot's access token ({rejected.error}). Configure a new "
                        "access_token, or a password to log in with, and start again.") from rejected
    logger.warning("matrix: the access token was rejected (%s); logging in again with the password", rejected.error)
    # A logged-out device has lost its keys on the server: start a new device, with a key store of its own.
    client.forget_device()
    delay = 1.0
    while True:
        try:
            return await log_in(client, settings)
        except RateLimited as again:
            await anyio.sleep(max(again.retry_after, 1.0))
        except PlatformAPIError as again:
            if "M_FORBIDDEN" in again.error:  # the password is wrong (changed) as well
                raise LoginLost(f"matrix: logging in again failed: {again.error}") from again
            logger.warning("matrix login failed, retrying in %.0fs: %s", delay, again)
            await anyio.sleep(delay)
            delay = min(delay * 2, 60.0)
