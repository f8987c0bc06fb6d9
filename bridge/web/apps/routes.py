"""The app page's routes on the bridge's one HTTP server, and the one call the core makes to hand out a link.

On the bridge's origin: GET `/app/<token>` is the page (the first browser to open it holds the link from then on),
GET `/app/<token>/view` what the page needs to start the app (its HTML, policy, the tool's input and result), POST
`/app/<token>/rpc` the app's requests, which the page hands over; `/app-static/<file>` the page's own files. On the
sandbox origin only: GET `/app-sandbox/<token>`, the relay page under the resource's policy.

Every request the app makes is decided here, not in the browser: a tool call must name a tool of the view's server
that its app may see, and runs as the person's call typed in chat (`AppDoor.app_tool_call`: the approval rules,
grants and quorum, a card in the conversation while the page waits); a resource read goes to the view's server only;
a message is cleaned and posted in the conversation labelled with the server and the person; a link is given back
with the host it really opens, for the page to show (never to follow). Refusals are short pages or JSON errors with
their own status, never a traceback.
"""

from __future__ import annotations

import base64
import binascii
import json
import logging
import time
from typing import Any, Protocol
from urllib.parse import urlsplit

from mcp import MCPError
from mcp.types import CallToolResult
from starlette.requests import ClientDisconnect, Request
from starlette.responses import HTMLResponse, JSONResponse, Response

from bridge import __version__
from bridge.cards.chat import Outbound
from bridge.door.model import Actor
from bridge.errors import AuthError, BridgeError, SessionError
from bridge.safety import browser_url
from bridge.safety.sanitize import clean, visible
from bridge.servers import apps_extension
from bridge.servers.sessions import SessionPool
from bridge.text.durations import in_words
from bridge.text.plain import shorten
from bridge.web.apps import csp, meta
from bridge.web.apps.links import AppClaims, AppLinks, Browsers, Refusal
from bridge.web.apps.page import STATIC, app_page, notice, page_headers, sandbox_headers, sandbox_page
from bridge.web.apps.views import AppResource, AppView, AppViews
from bridge.web.server import HttpServer

logger = logging.getLogger(__name__)

PAGE = "/app/{token}"
COOKIE = "mcp_app"
MAX_BODY = 1024 * 1024
"""An app's request is a tool call's arguments or a message: a megabyte is plenty."""
MAX_HTML = 5 * 1024 * 1024
MAX_MESSAGE = 2000

_REFUSALS: dict[Refusal, tuple[int, str, str]] = {
    Refusal.INVALID: (400, "This link is not valid", "It may be incomplete, altered, or from before the bridge "
                      "restarted."),
    Refusal.EXPIRED: (410, "This link has expired", "Open the app again from the chat to get a new link."),
    Refusal.OTHER_BROWSER: (403, "This link is open in another browser", "Each link works for the one person it "
                            "was made for, in the browser that opened it first. Press Open in the chat to get your "
                            "own."),
}


class AppDoor(Protocol):
    """What the app page needs of the core to run a tool call (the host has it)."""

    async def app_tool_call(self, view: AppView, actor: Actor, name: str,
                            arguments: dict[str, Any]) -> CallToolResult | None:
        """Run a call the app makes, as `actor`'s call in the view's conversation; None when it did not run (the
        conversation was told why)."""
        ...


class _Refused(Exception):
    """An app request refused: its status and the message the app is given."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


class AppPages:
    """Registers the app routes on `server` and issues links to them."""

    def __init__(self, views: AppViews, door: AppDoor, pool: SessionPool, outbound: Outbound, server: HttpServer,
                 links: AppLinks | None = None, *, sandbox_url: str = "") -> None:
        self._views = views
        self._door = door
        self._pool = pool
        self._out = outbound
        self._server = server
        self.links = links or AppLinks(lifetime=views.lifetime)
        self.browsers = Browsers()
        self._sandbox_url = sandbox_url.rstrip("/")
        server.route(PAGE, self._page)
        server.route(PAGE + "/view", self._view)
        server.route(PAGE + "/rpc", self._rpc, ("POST",))
        server.route("/app-sandbox/{token}", self._sandbox)
        server.route("/app-static/{name}", self._static)

    def link_for(self, view_id: str, actor: Actor) -> str | None:
        """A link of `actor`'s own to a view, or None once the view has ended. Send it to them privately."""
        view = self._views.get(view_id)
        if view is None:
            return None
        return self._server.url(PAGE.format(token=self.links.issue(view.id, actor, view.ends_at)))

    # -- origins -------------------------------------------------------------------------------------------------

    def sandbox_base(self) -> str:
        """The sandbox origin's base address: configured, or this server's own with the host name swapped."""
        return self._sandbox_url or apps_extension.swapped(self._server.url(""))

    def _host_origin(self) -> str:
        return browser_url.origin(self._server.url("/"))

    def _on_sandbox(self, request: Request) -> bool:
        wanted = urlsplit(self.sandbox_base()).netloc.lower()
        return bool(wanted) and request.headers.get("host", "").lower() == wanted

    # -- the page ------------------------------------------------------------------------------------------------

    async def _page(self, request: Request) -> Response:
        if self._on_sandbox(request):
            return _notice(404, "Not here", "This address serves apps' sandboxes only.")
        claims = self.links.check(request.path_params["token"])
        if isinstance(claims, Refusal):
            return _refused(claims)
        view = self._views.get(claims.view_id)
        if view is None:
            return _notice(410, "This app has ended", "Its link expired or the bridge restarted. Run the tool again "
                           "in the chat to open it anew.")
        held = self.browsers.bind(claims, request.cookies.get(COOKIE))
        if held is False:
            logger.info("app link for %s refused: opened in another browser", claims.actor.key)
            return _refused(Refusal.OTHER_BROWSER)
        title = clean(str(view.tool_info.get("title") or view.tool))
        left = max(0.0, claims.expires_at - time.time())
        html = app_page(view.label.text(), shorten(title, 120), claims.actor.label(), in_words(left))
        response = HTMLResponse(html, headers=page_headers(browser_url.origin(self.sandbox_base() + "/")))
        if isinstance(held, str):
            # Scoped to this link's own path as the browser sees it (behind a proxy, under its path prefix).
            path = urlsplit(self._server.url(PAGE.format(token=request.path_params["token"]))).path
            response.set_cookie(COOKIE, held, max_age=max(1, int(left)), path=path, httponly=True,
                                samesite="strict", secure=self._server.url("/").startswith("https:"))
        return response

    async def _view(self, request: Request) -> Response:
        try:
            claims, view = self._holder(request)
            resource = await self._resource(view, claims.actor)
        except _Refused as refused:
            return _error(refused.status, refused.message)
        return JSONResponse({
            "html": resource.html, "csp": dict(resource.csp), "input": view.arguments, "result": view.result,
            "tool": view.tool_info, "host": {"name": "mcp-chat-bridge", "version": __version__},
            "sandbox": f"{self.sandbox_base()}/app-sandbox/{self.links.sandbox_token(view.id)}",
        }, headers=_JSON_HEADERS)

    async def _rpc(self, request: Request) -> Response:
        try:
            claims, view = self._holder(request)
            if not self._same_origin(request):
                raise _Refused(403, "This request came from another site.")
            method, params = await _read_request(request)
            result = await self._dispatch(view, claims.actor, method, params)
        except _Refused as refused:
            return _error(refused.status, refused.message)
        except ClientDisconnect:
            return _error(400, "The request did not arrive whole.")
        except Exception:  # the top of a request: the app gets an error, the log gets the traceback
            logger.exception("an app request failed")
            return _error(500, "Something went wrong on the bridge's side; it was logged.")
        return JSONResponse({"result": result}, headers=_JSON_HEADERS)

    # -- the sandbox and the page's files ------------------------------------------------------------------------

    async def _sandbox(self, request: Request) -> Response:
        if not self._on_sandbox(request):
            return _notice(404, "Not here", "Apps run on the sandbox's own address only.")
        view_id = self.links.sandbox_view(request.path_params["token"])
        view = self._views.get(view_id) if view_id else None
        if view is None or view.resource is None:
            return _notice(404, "No such app", "Open the app from its link in the chat.")
        return HTMLResponse(sandbox_page(self._host_origin()), headers=sandbox_headers(view.resource.policy))

    async def _static(self, request: Request) -> Response:
        found = STATIC.get(request.path_params["name"])
        if found is None:
            return Response("not found\n", status_code=404, media_type="text/plain")
        media, body = found
        return Response(body, media_type=media, headers={"X-Content-Type-Options": "nosniff",
                                                         "Cache-Control": "no-cache"})

    # -- checks --------------------------------------------------------------------------------------------------

    def _holder(self, request: Request) -> tuple[AppClaims, AppView]:
        """The claims and view of a request from the browser that holds its link, else `_Refused`."""
        if self._on_sandbox(request):
            raise _Refused(404, "Not here.")
        claims = self.links.check(request.path_params["token"])
        if isinstance(claims, Refusal):
            raise _Refused(_REFUSALS[claims][0], _REFUSALS[claims][1] + ".")
        if not self.browsers.holds(claims, request.cookies.get(COOKIE)):
            raise _Refused(403, _REFUSALS[Refusal.OTHER_BROWSER][1] + ".")
        view = self._views.get(claims.view_id)
        if view is None:
            raise _Refused(410, "This app has ended.")
        return claims, view

    def _same_origin(self, request: Request) -> bool:
        site = request.headers.get("sec-fetch-site")
        if site is not None and site != "same-origin":
            return False
        origin = request.headers.get("origin")
        return origin is None or origin.lower() in {f"{request.url.scheme}://{request.url.netloc}".lower(),
                                                    self._host_origin()}

    # -- what the app asks for -----------------------------------------------------------------------------------

    async def _dispatch(self, view: AppView, actor: Actor, method: str, params: dict[str, Any]) -> Any:
        if method == "tools/call":
            return await self._call(view, actor, params)
        if method == "resources/read":
            uri = params.get("uri")
            if not isinstance(uri, str) or not uri:
                raise _Refused(400, "resources/read needs a uri.")
            result = await self._read(view, actor, uri)
            return result.model_dump(mode="json", by_alias=True, exclude_none=True)
        if method == "ui/message":
            return await self._message(view, actor, params)
        if method == "ui/open-link":
            url = params.get("url")
            if not isinstance(url, str) or not url:
                raise _Refused(400, "ui/open-link needs a url.")
            check = browser_url.check_host(url)
            return {"url": visible(shorten(url, 2000)), "host": check.text(), "warning": check.warning,
                    "href": check.href if check.web else ""}
        raise _Refused(400, f"The bridge does not handle {shorten(clean(method), 60)!r} from apps.")

    async def _call(self, view: AppView, actor: Actor, params: dict[str, Any]) -> dict[str, Any]:
        name, arguments = params.get("name"), params.get("arguments") or {}
        if not isinstance(name, str) or not isinstance(arguments, dict):
            raise _Refused(400, "tools/call needs a tool name and an object of arguments.")
        try:
            tools = {t.name: t for t in await self._pool.list_tools(view.conversation, view.server, person=actor)}
        except (SessionError, AuthError) as exc:
            raise _Refused(503, shorten(str(exc), 300)) from None
        tool = tools.get(name)
        if tool is None or not meta.for_app(tool):
            logger.warning("app of %s asked for tool %r, which it may not call", view.server, name)
            raise _Refused(403, f"{view.server} has no tool named {shorten(clean(name), 80)!r} that its app may call.")
        logger.info("app of %s calls %s for %s", view.server, name, actor.key)
        result = await self._door.app_tool_call(view, actor, name, arguments)
        if result is None:
            return {"content": [{"type": "text", "text": "The call did not run; the chat says why."}],
                    "isError": True}
        return result.model_dump(mode="json", by_alias=True, exclude_none=True)

    async def _message(self, view: AppView, actor: Actor, params: dict[str, Any]) -> dict[str, Any]:
        content = params.get("content")
        blocks = content if isinstance(content, list) else []
        text = "\n".join(b["text"] for b in blocks if isinstance(b, dict) and b.get("type") == "text"
                         and isinstance(b.get("text"), str)).strip()
        if not text:
            raise _Refused(400, "The bridge posts text messages only.")
        await self._out.say(view.conversation, f"Message from the app of {view.label.text()}, sent by "
                                               f"{actor.label()}:\n{shorten(clean(text), MAX_MESSAGE)}")
        return {}

    async def _read(self, view: AppView, actor: Actor, uri: str) -> Any:
        try:
            session = await self._pool.get(view.conversation, view.server, actor)
            assert session.client is not None
            with self._pool.hold(session):
                try:
                    return await session.client.read_resource(uri)
                finally:
                    self._pool.released(session)
        except MCPError as exc:
            raise _Refused(502, f"{view.server} refused: {shorten(clean(exc.error.message), 300)}") from None
        except (SessionError, AuthError, BridgeError) as exc:
            raise _Refused(503, shorten(str(exc), 300)) from None

    async def _resource(self, view: AppView, actor: Actor) -> AppResource:
        """The view's app, read from its server once and kept."""
        if view.resource is not None:
            return view.resource
        result = await self._read(view, actor, view.resource_uri)
        contents = [c for c in result.contents if getattr(c, "mime_type", None) == apps_extension.MIME_TYPE]
        if not contents:
            raise _Refused(502, f"{view.server} sent no app at {shorten(view.resource_uri, 200)}.")
        content = contents[0]
        text = getattr(content, "text", None)
        if text is None:
            try:
                text = base64.b64decode(getattr(content, "blob", ""), validate=True).decode("utf-8")
            except (binascii.Error, UnicodeDecodeError):
                raise _Refused(502, f"{view.server} sent an app that is not UTF-8 HTML.") from None
        if len(text) > MAX_HTML:
            raise _Refused(502, f"{view.server} sent an app larger than {MAX_HTML // (1024 * 1024)} MB.")
        declared = meta.resource_ui(content).get("csp")
        declared = declared if isinstance(declared, dict) else {}
        # Only what the policy lets through is given back, so the app sees the sources that really apply.
        kept = {k: csp.sources(declared.get(k)) for k in ("connectDomains", "resourceDomains", "frameDomains",
                                                          "baseUriDomains") if csp.sources(declared.get(k))}
        view.resource = AppResource(text, kept, csp.policy(kept, self._host_origin()))
        return view.resource


_JSON_HEADERS = {"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff"}


async def _read_request(request: Request) -> tuple[str, dict[str, Any]]:
    if request.headers.get("content-type", "").split(";")[0].strip().lower() != "application/json":
        raise _Refused(415, "Send JSON.")
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > MAX_BODY:
            raise _Refused(413, "The request is too large.")
    try:
        data = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        raise _Refused(400, "The request is not JSON.") from None
    if not isinstance(data, dict) or not isinstance(data.get("method"), str):
        raise _Refused(400, "The request names no method.")
    params = data.get("params")
    return data["method"], params if isinstance(params, dict) else {}


def _error(status: int, message: str) -> Response:
    return JSONResponse({"error": {"message": message}}, status_code=status, headers=_JSON_HEADERS)


def _notice(status: int, heading: str, *lines: str) -> Response:
    return HTMLResponse(notice(heading, *lines), status_code=status,
                        headers=page_headers("'none'"))


def _refused(refusal: Refusal) -> Response:
    status, heading, why = _REFUSALS[refusal]
    return _notice(status, heading, why)


def app_pages(views: AppViews, door: AppDoor, pool: SessionPool, outbound: Outbound,
              server: HttpServer | None, *, key: str = "", sandbox_url: str = "") -> AppPages | None:
    """App pages when the bridge has an HTTP server, else None (then no app is offered)."""
    if server is None:
        return None
    return AppPages(views, door, pool, outbound, server, AppLinks(key or None, lifetime=views.lifetime),
                    sandbox_url=sandbox_url)
