"""Sign-ins in flight, by their `state`, and what a redirect coming back does to them.

`Authorizations` is the registry: a state is single use, bound to the person the sign-in was started for, and
expires. `Authorizations.receive` turns the query of a redirect into an answer for the waiting flow and a page for
the browser. It is the one callback handler: `endpoint` serves it on the bridge's HTTP server (chat sign-ins), and
`bridge.auth.callback` on a terminal's one-shot loopback listener.

A code is not yet a sign-in: the SDK exchanges it at the token endpoint only after the waiting flow got it, and the
authorization server may still refuse. So the redirect's page waits (at most `outcome_wait`) for the sign-in's end,
which the OAuth provider reports by state (`settle`: tokens stored, or the plain-words failure), and says what
happened; if the end takes longer it says the sign-in is being finished and to look where it was asked, never a
"signed in" that may turn out false.

Several workers on one Postgres store (`Shared`, `bridge.auth.fleet_signins`): a sign-in is also recorded in the
store, and a redirect may reach any worker. The one that started it (and alone holds its PKCE verifier) exchanges
the code; another hands the code over through the store and its page waits for the outcome the owner records. One
process (SQLite) keeps everything here, in memory.
"""

from __future__ import annotations

import html
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol
from urllib.parse import parse_qs, urlsplit

import anyio
from mcp.shared.auth import AuthorizationCodeResult

from bridge.errors import AuthError
from bridge.text.plain import shorten

if TYPE_CHECKING:
    from starlette.requests import Request
    from starlette.responses import Response

_OAUTH_ERRORS = {
    "access_denied": "access was declined",
    "invalid_request": "the sign-in request was not accepted",
    "unauthorized_client": "this bridge is not allowed to ask for access this way",
    "unsupported_response_type": "the authorization server does not support this kind of sign-in",
    "invalid_scope": "the access asked for is not available",
    "server_error": "the authorization server had an internal error",
    "temporarily_unavailable": "the authorization server is busy; try again shortly",
    # Answers of the token endpoint (RFC 6749 §5.2, RFC 8707 §2).
    "invalid_grant": "the sign-in is no longer valid (used, expired or revoked); run the call again to sign in anew",
    "invalid_client": "it did not accept this bridge's client credentials",
    "unsupported_grant_type": "it does not allow this kind of sign-in for this bridge",
    "invalid_target": "it does not issue access for this server's address",
}


@dataclass(frozen=True, slots=True)
class Page:
    """What the browser is shown after the redirect."""

    status: int
    title: str
    text: str

    def html(self) -> str:
        return (f"<!doctype html><meta charset=utf-8><title>{html.escape(self.title)}</title>"
                f"<h1>{html.escape(self.title)}</h1><p>{html.escape(self.text)}</p>")


NOT_WAITING = Page(400, "Sign-in link not valid",
                  "This sign-in answer is not one the bridge is waiting for: it was already used, it expired, or it "
                  "was altered. Start the sign-in again from where you were asked.")
NOT_YOURS = Page(403, "Not your sign-in", "This sign-in was started for someone else.")


def finishing_page(server: str) -> Page:
    return Page(202, "Finishing the sign-in",
                f"The sign-in to {server} is being finished. Look where you were asked to sign in: it will say "
                "whether it worked. You can close this tab.")


def ended_page(server: str, error: str | None) -> Page:
    """The page for a sign-in that ended: signed in (`error` None), or not and why."""
    if error is not None:
        return Page(400, "Sign-in failed", sentence(error))
    return Page(200, "Signed in", f"You are signed in to {server}. You can close this tab.")


def refusal(server: str, params: Mapping[str, str]) -> tuple[str, Page] | None:
    """Why a redirect that brings no code ends its sign-in (the authorization server's refusal, or nothing sent
    back), and the page to show; None when it brings a code."""
    if params.get("error"):
        error = (f"the authorization server refused the sign-in to {server}: "
                 f"{plain_oauth_error(params['error'], params.get('error_description', ''))}")
        return error, Page(400, "Sign-in refused", sentence(error))
    if not params.get("code"):
        return (f"the authorization server sent no code back for {server}",
                Page(400, "Sign-in failed", "The authorization server sent no code back."))
    return None


OUTCOME_WAIT = 20.0
"""How long the redirect's page waits for the code's exchange before saying the sign-in is being finished."""


@dataclass(eq=False)
class Authorization:
    """One sign-in in flight."""

    state: str
    server: str
    person: str
    expires_at: float
    result: AuthorizationCodeResult | None = None
    """The code the redirect brought back, for the waiting flow to exchange."""
    error: str | None = None
    """Why it did not sign in: refused, declined, timed out, or the code's exchange failed."""
    done: anyio.Event = field(default_factory=anyio.Event)
    """The redirect came back (with a code or a refusal), or the sign-in ended without one."""
    finished: anyio.Event = field(default_factory=anyio.Event)
    """The end: signed in (tokens stored, `error` None), or not (`error` says why)."""
    on_end: Callable[[Authorization], None] | None = None
    """Told of the end (a shared store records it, for a page waiting on another worker)."""

    def end(self, error: str | None) -> None:
        """Record the end once (the first one counts)."""
        if not self.finished.is_set():
            self.error = error
            self.done.set()
            self.finished.set()
            if self.on_end is not None:
                self.on_end(self)


class Shared(Protocol):
    """Sign-ins in a store several workers share (`bridge.auth.fleet_signins.SigninsOnStore`)."""

    async def record(self, auth: Authorization) -> None:
        """Record a sign-in this worker started, before anyone is shown its link (AuthError if it cannot be)."""
        ...

    async def arrived(self, params: Mapping[str, str], person: str | None, held: Authorization | None) -> Page | None:
        """A redirect reached this worker: the page when it ends here (refused, or handed to the worker that started
        the sign-in and finished there), or None when the sign-in is this worker's (`held`) and is now marked used
        across workers."""
        ...

    async def handed_over(self, auth: Authorization) -> AuthorizationCodeResult | str:
        """The code another worker received for this worker's sign-in, or why it ended without one."""
        ...

    def ended(self, auth: Authorization) -> None:
        """Record how a sign-in of this worker's ended (for a page waiting on another worker)."""
        ...


def state_of(authorization_url: str) -> str:
    values = parse_qs(urlsplit(authorization_url).query).get("state") or [""]
    return values[0]


def plain_oauth_error(code: str, description: str = "") -> str:
    """An authorization server's error redirect in words a person understands (its text is untrusted: shortened)."""
    text = _OAUTH_ERRORS.get(code, f"it answered {shorten(code, 60)!r}")
    if description:
        text += f" ({shorten(description, 200)})"
    return text


class Authorizations:
    """Sign-ins in flight, by state. Not thread-safe: used from one event loop."""

    def __init__(self, outcome_wait: float = OUTCOME_WAIT, shared: Shared | None = None) -> None:
        self._shared = shared
        self._pending: dict[str, Authorization] = {}
        self._exchanging: dict[str, Authorization] = {}
        """Sign-ins whose code came back, until their provider reports the exchange's outcome (`settle`)."""
        self.outcome_wait = outcome_wait

    def begin(self, authorization_url: str, *, server: str, person: str, ttl: float) -> Authorization:
        """Register the sign-in an authorization URL starts (its `state` is what the redirect brings back)."""
        state = state_of(authorization_url)
        if not state:
            raise AuthError(f"{server}: the sign-in link has no state parameter; refusing to use it")
        self._expire()
        auth = Authorization(state, server, person, time.time() + ttl)
        if self._shared is not None:
            auth.on_end = self._shared.ended
        self._pending[state] = auth
        return auth

    async def start(self, authorization_url: str, *, server: str, person: str, ttl: float) -> Authorization:
        """`begin`, and on a shared store record it there, so its redirect may reach any worker."""
        auth = self.begin(authorization_url, server=server, person=person, ttl=ttl)
        if self._shared is not None:
            try:
                await self._shared.record(auth)
            except BaseException:
                self._pending.pop(auth.state, None)
                raise
        return auth

    async def receive(self, params: Mapping[str, str], person: str | None = None) -> Page:
        """Handle a redirect's query. `person`, when the caller knows who is at the browser, must be the one the
        sign-in was started for. A state is used once: a replay, a tampered or an expired one is refused. A code is
        handed to the waiting flow, and the page waits for its exchange (`settle`) to say how the sign-in ended."""
        if self._shared is not None and params.get("state"):
            self._expire()
            page = await self._shared.arrived(params, person, self._pending.get(params["state"]))
            if page is not None:
                return page
        handed = self._hand_over(params, person)
        if isinstance(handed, Page):
            return handed
        with anyio.move_on_after(self.outcome_wait):
            await handed.finished.wait()
        if not handed.finished.is_set():
            return finishing_page(handed.server)
        return ended_page(handed.server, handed.error)

    def _hand_over(self, params: Mapping[str, str], person: str | None) -> Page | Authorization:
        """The page for a redirect that ends here, or the sign-in whose code was handed to its flow."""
        self._expire()
        state = params.get("state", "")
        auth = self._pending.get(state) if state else None
        if auth is None:
            return NOT_WAITING
        if person is not None and person != auth.person:
            return NOT_YOURS
        del self._pending[state]
        refused = refusal(auth.server, params)
        if refused is not None:
            auth.end(refused[0])
            return refused[1]
        self._handed(auth, AuthorizationCodeResult(code=params["code"], state=state, iss=params.get("iss") or None))
        return auth

    def _handed(self, auth: Authorization, result: AuthorizationCodeResult) -> None:
        """The sign-in's code arrived: its flow exchanges it, then `settle`s."""
        auth.result = result
        self._exchanging[auth.state] = auth
        auth.done.set()

    async def _from_elsewhere(self, auth: Authorization) -> None:
        """Wait for a code (or a refusal) another worker received for this sign-in."""
        assert self._shared is not None
        got = await self._shared.handed_over(auth)
        if isinstance(got, str):
            auth.end(got)
        elif not auth.done.is_set():
            self._handed(auth, got)

    async def wait(self, auth: Authorization, too_late: str | None = None) -> AuthorizationCodeResult:
        """The redirect's code, once it arrives, for the flow to exchange (then `settle`). Raises AuthError on a
        refusal or when the time is up (`too_late`: what to say then)."""
        try:
            with anyio.move_on_after(max(0.0, auth.expires_at - time.time())):
                if self._shared is None:
                    await auth.done.wait()
                else:
                    async with anyio.create_task_group() as tg:
                        tg.start_soon(self._from_elsewhere, auth)
                        await auth.done.wait()
                        tg.cancel_scope.cancel()
        except BaseException:
            # Stopped while waiting: a code arriving now has nobody to exchange it, so nothing may wait for that.
            self.settle(auth.state, f"the sign-in to {auth.server} was stopped before it finished")
            raise
        self._pending.pop(auth.state, None)
        if auth.result is not None:
            return auth.result
        auth.end(too_late or f"nobody finished signing in to {auth.server} in time")
        raise AuthError(auth.error or f"signing in to {auth.server} failed")

    def settle(self, state: str, error: str | None) -> Authorization | None:
        """How a sign-in ended, reported by whoever exchanged its code: tokens stored (`error` None) or not. The
        sign-in, if it is one of these."""
        auth = self._exchanging.pop(state, None) or self._pending.pop(state, None)
        if auth is not None:
            auth.end(error)
        return auth

    def refuse(self, auth: Authorization, reason: str) -> None:
        """End a sign-in without a redirect (the person declined its prompt): its state is no longer accepted."""
        self._pending.pop(auth.state, None)
        if not auth.done.is_set():
            auth.end(reason)

    def _expire(self) -> None:
        now = time.time()
        for state in [s for s, a in self._pending.items() if a.expires_at <= now]:
            del self._pending[state]
        # A code nobody reported on (its flow was lost between the redirect and the exchange) is not kept forever.
        for state in [s for s, a in self._exchanging.items() if a.expires_at + self.outcome_wait <= now]:
            auth = self._exchanging.pop(state)
            auth.end(f"signing in to {auth.server} did not finish")


def sentence(text: str) -> str:
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def endpoint(authorizations: Authorizations) -> Callable[[Request], Awaitable[Response]]:
    """The redirect's route (Starlette, imported only by whoever serves HTTP)."""
    from starlette.responses import HTMLResponse

    async def receive(request: Request) -> Response:
        page = await authorizations.receive(dict(request.query_params))
        # The URL carried a one-time code: keep it out of caches and out of the Referer of any later page.
        return HTMLResponse(page.html(), status_code=page.status,
                            headers={"Cache-Control": "no-store", "Referrer-Policy": "no-referrer"})

    return receive
