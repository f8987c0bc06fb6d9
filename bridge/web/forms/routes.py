"""The web form's routes on the bridge's one HTTP server, and the one call the core makes to hand out a link.

GET `/form/<token>` shows the form; POST to the same address turns the submission into the JSON content a chat
answer would carry and hands it to the core's decision door, so the same validation, first-valid-decision rule,
audit row and card update happen as for a click in chat. The token is the CSRF guard (it is in the form's action and
nowhere a third party could read it); a present `Origin` (and `Sec-Fetch-Site`) must be this site as well. Every
refusal is a short page with its own status, never a traceback.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Protocol
from urllib.parse import parse_qsl

from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, Response

from bridge.config.file import HttpConfig
from bridge.door.model import Action, Actor, DecisionIn, DecisionResult, Interaction, Verdict
from bridge.safety import browser_url
from bridge.web.forms.fields import content_from_raw, field_views, raw_from_content, raw_from_items
from bridge.web.forms.links import FormLinks, LinkClaims, Refusal
from bridge.web.forms.page import HEADERS, form_page, notice_page
from bridge.web.server import HttpServer

logger = logging.getLogger(__name__)

PATH = "/form/{token}"
MAX_BODY = 256 * 1024
"""A form post is a few kilobytes; anything much larger is refused before it is read whole."""
MAX_FIELDS = 2000

_ACTIONS: dict[str, Action] = {"accept": "accept", "decline": "decline", "cancel": "cancel"}
_ASK_AGAIN = "Ask for a new link in the chat, or answer there."
_REFUSALS: dict[Refusal, tuple[int, str, str]] = {
    Refusal.INVALID: (400, "This link is not valid",
                      "It may be incomplete, altered, or from before the bridge restarted."),
    Refusal.EXPIRED: (410, "This link has expired", "Links work for a limited time and end with their request."),
    Refusal.USED: (410, "This link has already been used", "Each link answers once."),
}


class DecisionDoor(Protocol):
    """What the web form needs of the core: the `bridge.door.ports.Inbound` methods it uses (the host has them)."""

    async def open_anywhere(self, interaction_id: str) -> Interaction | None:
        """Open here, or on another worker of a shared store (the decision door reaches it there)."""
        ...

    async def decide(self, decision: DecisionIn) -> DecisionResult: ...


class WebForms:
    """Registers the form routes on `server` and issues links to them."""

    def __init__(self, door: DecisionDoor, server: HttpServer, links: FormLinks | None = None) -> None:
        self._door = door
        self._server = server
        self.links = links or FormLinks()
        server.route(PATH, self._endpoint, ("GET", "POST"))

    def link_for(self, interaction: Interaction, actor: Actor) -> str | None:
        """A one-time address for `actor` to answer `interaction` in a browser, or None when they may not answer it
        or it has no form. Send it to that person privately: whoever holds it can answer as them."""
        token = self.links.issue(interaction, actor)
        return None if token is None else self._server.url(PATH.format(token=token))

    # -- the endpoint --------------------------------------------------------------------------------------------

    async def _endpoint(self, request: Request) -> Response:
        try:
            return await self._respond(request)
        except ClientDisconnect:
            return _page(400, "The form did not arrive whole", "Try sending it again.")
        except Exception:  # the top of a request: a person gets a page, the log gets the traceback
            logger.exception("web form request failed")
            return _page(500, "Something went wrong on the bridge's side",
                         "It was logged. Your answer was not sent; answer in the chat instead.")

    async def _respond(self, request: Request) -> Response:
        claims = self.links.check(request.path_params["token"])
        if isinstance(claims, Refusal):
            status, heading, why = _REFUSALS[claims]
            logger.info("web form link refused: %s", claims.value)
            return _page(status, heading, why, _ASK_AGAIN)
        posting = request.method == "POST"
        if posting and not self._same_site(request):
            logger.warning("web form post for %s refused: cross-site origin", claims.interaction_id)
            return _page(403, "This answer was sent from another site", "Open the link you were given and answer "
                         "there.")
        # Any worker serves any link: the card may be held by another worker (its decision travels through the store).
        interaction = await self._door.open_anywhere(claims.interaction_id)
        if interaction is None:
            return _page(410, "This request is no longer open",
                         "It was answered, it expired, or the call behind it ended. The chat shows how it ended.")
        if not interaction.may_decide(claims.actor):
            who = interaction.requester.label() if interaction.requester else "the approvers"
            return _page(403, "This link is not for you", f"Only {who} can answer this request.")
        if not posting:
            raw = raw_from_content(interaction.form, interaction.form.defaults())
            return self._form(request, interaction, claims, raw, {}, "", 200)
        return await self._submit(request, interaction, claims)

    async def _submit(self, request: Request, interaction: Interaction, claims: LinkClaims) -> Response:
        items = await _read_form(request)
        if items is None:
            return _page(400, "The form could not be read", "Send it again from the page you were given.")
        action = _ACTIONS.get(next((v for k, v in items if k == "action"), ""))
        if action is None:
            return _page(400, "The form could not be read", "Press Accept, Decline or Cancel on the form.")
        raw = raw_from_items(interaction.form, items)
        content = content_from_raw(interaction.form, raw) if action == "accept" else None
        result = await self._door.decide(DecisionIn(interaction.id, claims.actor, action, content))
        if result.verdict is Verdict.CLAIMED:
            self.links.spend(claims)
            server = interaction.server.text()
            what = {"accept": f"Your answer was sent to {server}.",
                    "decline": f"You declined the request from {server}.",
                    "cancel": f"You cancelled the request from {server}."}[action]
            return _page(200, "Thanks — sent", what,
                         "The request in the chat shows it too. You can close this page.", ok=True)
        if result.verdict is Verdict.INVALID:
            problem = ("Some answers need a change: see the notes below." if result.errors
                       else result.message or "The answer is not valid.")
            return self._form(request, interaction, claims, raw, result.errors, problem, 422)
        if result.verdict is Verdict.REFUSED:
            return _page(403, "This link is not for you", result.message)
        return _page(410, "This request is no longer open", result.message or "It has ended.")

    @staticmethod
    def _form(request: Request, interaction: Interaction, claims: LinkClaims, raw: dict[str, list[str]],
              errors: Mapping[str, str], problem: str, status: int) -> Response:
        views = field_views(interaction.form, raw, errors)
        # Relative, so the form posts back to the address it was opened at, also behind a proxy's path prefix.
        action = "./" + request.path_params["token"]
        html = form_page(interaction, claims.actor, action, views, problem=problem, expires_at=claims.expires_at)
        return HTMLResponse(html, status_code=status, headers=HEADERS)

    def _same_site(self, request: Request) -> bool:
        """A browser's post must come from this site: the page's own origin, or the configured public one."""
        site = request.headers.get("sec-fetch-site")
        if site is not None and site not in ("same-origin", "none"):
            return False
        origin = request.headers.get("origin")
        if origin is None:
            return True  # not a browser, or an old one: the unguessable token alone guards the post
        allowed = {f"{request.url.scheme}://{request.url.netloc}".lower()}
        if self._server.public_url:
            # Compared as the browser serializes its Origin (lower case, no default port), not as written.
            allowed.add(browser_url.origin(self._server.public_url))
        return origin.lower() in allowed


def web_forms(config: HttpConfig, server: HttpServer | None, door: DecisionDoor) -> WebForms | None:
    """Web forms when the bridge has an HTTP server with a public address people's browsers reach, else None (then
    cards offer no web link)."""
    if server is None or not config.public_url:
        return None
    links = FormLinks(config.form_link_secret or None, lifetime=config.form_link_lifetime)
    return WebForms(door, server, links)


async def _read_form(request: Request) -> list[tuple[str, str]] | None:
    """The url-encoded pairs of a form post (what a form without file inputs sends), read up to `MAX_BODY`."""
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/x-www-form-urlencoded":
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            return None
    try:
        return parse_qsl(body.decode("ascii"), keep_blank_values=True, max_num_fields=MAX_FIELDS,
                         encoding="utf-8", errors="strict")
    except (UnicodeDecodeError, ValueError):
        return None


def _page(status: int, heading: str, *lines: str, ok: bool = False) -> Response:
    return HTMLResponse(notice_page(heading, *lines, ok=ok), status_code=status, headers=HEADERS)
