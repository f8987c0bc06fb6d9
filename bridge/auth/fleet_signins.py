"""Per-person sign-ins on several workers (one Postgres store): the redirect may reach any of them.

The worker that started a sign-in holds its PKCE verifier in memory (the SDK's flow waits there), so it alone can
exchange the code. Each sign-in is also a row of the store (`bridge.storage.signin_rows`: a hash of the `state`, the
server, the person, the owning worker, the expiry; never the verifier). A redirect reaching another worker:

- is refused as on one process when the row is unknown, used, ended or expired (a state used on one worker cannot be
  replayed on another: the hand-over is one atomic update), or when it names another person;
- is told plainly when the owning worker has stopped (its lease lapsed): the sign-in cannot be finished, and the
  person's next call asks them again;
- else hands the code (or the authorization server's refusal) to the owner through the row, announced on the
  workers' decisions channel (polling as the fallback), and its page waits for the outcome the owner records: signed
  in once the tokens are stored, or the failure in plain words; never a "signed in" that may turn out false.

The owner's waiting flow watches its row the same way (`handed_over`), and records every end (`ended`).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Protocol, TypeVar

import anyio
from anyio.abc import TaskGroup
from mcp.shared.auth import AuthorizationCodeResult

from bridge.auth.signins import (
    NOT_WAITING,
    NOT_YOURS,
    OUTCOME_WAIT,
    Authorization,
    Page,
    ended_page,
    finishing_page,
    refusal,
    sentence,
)
from bridge.errors import AuthError, StoreError
from bridge.storage.api import SigninRows
from bridge.storage.rows import SigninRow
from bridge.storage.signin_rows import SIGNAL_PREFIX

logger = logging.getLogger(__name__)

T = TypeVar("T")

STORE_DOWN = Page(503, "Sign-in could not be checked",
                  "The bridge could not reach its store just now. Open the link from the sign-in page again in a "
                  "moment (go back and reload), or start the sign-in again from where you were asked.")


def stopped(server: str) -> str:
    return (f"the bridge worker that started this sign-in to {server} has stopped, so it cannot be finished; run "
            "the call again and you will be asked to sign in anew")


def not_answering(server: str) -> str:
    return (f"the bridge worker that started this sign-in to {server} did not take it up (it may have stopped); "
            "run the call again and you will be asked to sign in anew")


def state_hash(state: str) -> str:
    return hashlib.sha256(state.encode()).hexdigest()


class Watch(Protocol):
    """The workers' one listener (`bridge.storage.watch.DecisionWatch`)."""

    async def changed(self, key: str, look: Callable[[], Awaitable[T | None]]) -> T: ...


class SigninsOnStore:
    """`bridge.auth.signins.Shared` on a store several workers share. `run_in` the host's task group (where the
    ends are recorded)."""

    def __init__(self, store: SigninRows, watch: Watch, outcome_wait: float = OUTCOME_WAIT) -> None:
        self._store = store
        self._watch = watch
        self.outcome_wait = outcome_wait
        self._tasks: TaskGroup | None = None

    def run_in(self, tasks: TaskGroup) -> None:
        self._tasks = tasks

    async def record(self, auth: Authorization) -> None:
        try:
            await self._store.save_signin(state_hash(auth.state), auth.server, auth.person, auth.expires_at)
        except StoreError as exc:
            raise AuthError(f"could not start signing in to {auth.server}: the bridge's store did not record it "
                            f"({exc}); run the call again in a moment") from None

    def ended(self, auth: Authorization) -> None:
        if self._tasks is None:
            logger.warning("the end of a sign-in to %s was not recorded: the bridge is not running", auth.server)
            return
        try:
            self._tasks.start_soon(self._record_end, state_hash(auth.state), auth.server, auth.error)
        except RuntimeError:  # the host stopped: its lease ends with it, and other workers then say so
            logger.info("the end of a sign-in to %s was not recorded: the bridge is stopping", auth.server)

    async def _record_end(self, key: str, server: str, error: str | None) -> None:
        try:
            await self._store.end_signin(key, error)
        except StoreError as exc:
            logger.warning("could not record how a sign-in to %s ended: %s", server, exc)

    # -- the redirect, on any worker -----------------------------------------------------------------------------

    async def arrived(self, params: Mapping[str, str], person: str | None, held: Authorization | None) -> Page | None:
        key = state_hash(params["state"])
        try:
            row = await self._store.signin(key)
            if row is None or row.status != "pending" or row.expires_at <= time.time():
                return NOT_WAITING
            if person is not None and person != row.person:
                return NOT_YOURS
            if row.worker == self._store.worker_id:
                if held is None:  # ours on record, but not in this process's memory (a restart under the same id)
                    await self._store.end_signin(key, stopped(row.server))
                    return _stopped_page(row.server)
                return None if await self._store.use_signin(key) else NOT_WAITING
            return await self._hand_to_owner(key, row, params)
        except StoreError as exc:
            logger.warning("could not check a sign-in redirect against the store: %s", exc)
            return STORE_DOWN

    async def _hand_to_owner(self, key: str, row: SigninRow, params: Mapping[str, str]) -> Page:
        if not row.owner_alive:
            await self._store.end_signin(key, stopped(row.server))
            return _stopped_page(row.server)
        refused = refusal(row.server, params)
        error = refused[0] if refused is not None else None
        code = None if refused is not None else params["code"]
        if not await self._store.return_signin(key, code, params.get("iss") or None, error):
            return NOT_WAITING  # used or ended a moment ago, on some worker
        if refused is not None:
            return refused[1]  # the owner hears it too, and its waiting call ends saying so
        ended: SigninRow | None = None
        with anyio.move_on_after(self.outcome_wait):
            ended = await self._watch.changed(SIGNAL_PREFIX + key, self._ended(key))
        if ended is None:
            now = await self._store.signin(key)
            if now is not None and now.status == "returned" and \
                    await self._store.end_signin(key, not_answering(row.server)):
                return Page(503, "Sign-in could not finish", sentence(not_answering(row.server)))
            now = await self._store.signin(key)
            if now is not None and not now.ended and not now.owner_alive and \
                    await self._store.end_signin(key, stopped(row.server)):
                return _stopped_page(row.server)  # it died while exchanging the code
            if now is None or not now.ended:
                return finishing_page(row.server)  # the owner is exchanging the code: its prompt will say
            ended = now
        return ended_page(row.server, ended.error)

    def _ended(self, key: str) -> Callable[[], Awaitable[SigninRow | None]]:
        async def look() -> SigninRow | None:
            try:
                row = await self._store.signin(key)
            except StoreError as exc:
                logger.warning("could not read a sign-in's outcome: %s", exc)
                return None  # looked at again at the next notification or poll
            return row if row is not None and row.ended else None

        return look

    # -- the owner's flow ----------------------------------------------------------------------------------------

    async def handed_over(self, auth: Authorization) -> AuthorizationCodeResult | str:
        key = state_hash(auth.state)

        async def look() -> SigninRow | None:
            try:
                taken = await self._store.take_signin(key)
                if taken is not None:
                    return taken
                row = await self._store.signin(key)
            except StoreError as exc:
                logger.warning("could not look for a sign-in handed over by another worker: %s", exc)
                return None
            return row if row is not None and row.ended else None

        row = await self._watch.changed(SIGNAL_PREFIX + key, look)
        if row.status != "exchanging":
            return row.error or f"signing in to {auth.server} did not finish"
        if row.error is not None:
            return row.error
        if not row.code:
            return f"the authorization server sent no code back for {auth.server}"
        return AuthorizationCodeResult(code=row.code, state=auth.state, iss=row.iss)


def _stopped_page(server: str) -> Page:
    return Page(503, "Sign-in could not finish", sentence(stopped(server)))
