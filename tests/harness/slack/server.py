"""A local fake of Slack's Web API and Socket Mode endpoint, for adapter tests.

Why a fake server rather than mocks: slack-bolt and slack_sdk are best tested at their real seam, HTTP and a
websocket. The code under test then runs unmodified (a real ``AsyncApp``, a real ``AsyncSocketModeHandler``,
slack_sdk's real retry handlers), and the test inspects exactly what went over the wire. No maintained Slack
emulator exists, so this follows bolt's own mock server with three changes: it binds an ephemeral port (tests
can run in parallel), it runs on the test's event loop instead of a thread, and tests *await* calls and acks
instead of sleep-polling.

It implements only the slice of Slack the bridge uses, with the same response shapes and error codes as Slack.
It is asyncio-only, like aiohttp, bolt and slack_sdk.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import uuid
from collections import defaultdict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Self

from aiohttp import WSCloseCode, WSMsgType, web

from .blockkit import VIEW_METHODS, ack_problems, payload_problems

JSON = dict[str, Any]
EnvelopeType = Literal["events_api", "interactive", "slash_commands"]

TEAM_ID = "T111"
APP_ID = "A111"
BOT_USER_ID = "UBOT"
BOT_ID = "BBOT"

# Slack accepts these as JSON-encoded strings in form bodies; decoding them gives tests one shape to assert on.
_JSON_FIELDS = ("blocks", "attachments", "view", "metadata")

# Missing one of these gets Slack's generic "invalid_arguments", which catches adapter bugs early.
_REQUIRED: dict[str, tuple[str, ...]] = {
    "chat.postMessage": ("channel",),
    "chat.update": ("channel", "ts"),
    "chat.postEphemeral": ("channel", "user"),
    "chat.delete": ("channel", "ts"),
    "chat.getPermalink": ("channel", "message_ts"),
    "views.open": ("trigger_id", "view"),
    "views.update": ("view",),
    "views.push": ("trigger_id", "view"),
    "views.publish": ("user_id", "view"),
    "conversations.replies": ("channel", "ts"),
    "conversations.info": ("channel",),
    "users.info": ("user",),
    "reactions.add": ("channel", "timestamp", "name"),
    "conversations.open": ("users",),
    "conversations.members": ("channel",),
    "usergroups.users.list": ("usergroup",),
}


@dataclass(frozen=True)
class Call:
    """One Web API request, as the fake received and answered it."""

    method: str
    """The API method, e.g. ``"chat.postMessage"``, or ``"response_url"`` for a post to the fake response URL."""
    args: JSON
    """Query, form and JSON arguments merged; JSON-valued form fields (``blocks``, ``view``…) already decoded."""
    token: str | None
    """The bearer token the client sent, so tests can tell the bot client from the app-level one."""
    status: int
    response: JSON
    connection: int = 0
    """The client's TCP port: calls made over one kept-alive connection share it."""

    @property
    def ok(self) -> bool:
        return bool(self.response.get("ok"))


@dataclass
class StoredMessage:
    """The latest state of a message in a channel: ``chat.update`` and ``reactions.add`` change it in place."""

    channel: str
    ts: str
    text: str = ""
    blocks: list[JSON] = field(default_factory=list)
    thread_ts: str | None = None
    user: str = BOT_USER_ID
    reactions: list[str] = field(default_factory=list)

    def to_api(self) -> JSON:
        """The message as Slack returns it in ``message`` fields and ``conversations.replies``."""
        message: JSON = {"type": "message", "user": self.user, "text": self.text, "ts": self.ts}
        if self.user == BOT_USER_ID:
            message["bot_id"] = BOT_ID
        if self.blocks:
            message["blocks"] = self.blocks
        if self.thread_ts is not None:
            message["thread_ts"] = self.thread_ts
        if self.reactions:
            message["reactions"] = [{"name": name, "users": [BOT_USER_ID], "count": 1} for name in self.reactions]
        return message


@dataclass(frozen=True)
class Invalid:
    """A Block Kit payload Slack would refuse: where it was sent and why (``[json-pointer:…]`` names the place)."""

    method: str
    """The API method, ``"response_url"``, or ``"ack"`` for a listener's ``response_action`` view."""
    problems: tuple[str, ...]


@dataclass(frozen=True)
class _Failure:
    error: str
    status: int
    retry_after: int


class _ApiError(Exception):
    """An ``{"ok": false}`` answer; raised from method handlers to keep them linear."""

    def __init__(self, error: str, *details: str) -> None:
        super().__init__(error)
        self.error = error
        self.details = details


class FakeSlack:
    """Slack's Web API (``POST|GET /api/<method>``) and Socket Mode websocket (``/link``) on 127.0.0.1.

    Use it as ``async with FakeSlack() as slack:`` and point clients at ``slack.api_url``. Every request is
    recorded in ``calls``; messages and views are kept so tests can assert on the latest state.
    Wrap every ``wait_*`` and ``send_envelope`` in ``anyio.fail_after``: they wait for as long as it takes.
    """

    def __init__(self) -> None:
        self.calls: list[Call] = []
        self.messages: dict[tuple[str, str], StoredMessage] = {}
        """Keyed by ``(channel, ts)``; seed user messages with ``add_message``."""
        self.views: dict[str, JSON] = {}
        """Keyed by view id; the view as last returned by ``views.*``."""
        self.users: dict[str, str] = {}
        """User id → real name, served by ``users.info``; unknown ids get ``user_not_found``."""
        self.acks: list[JSON] = []
        """Every message the app sent over the websocket (Socket Mode acks)."""
        self.members: dict[str, list[str]] = {}
        """Channel id → member user ids, served by ``conversations.members`` (paged, 2 per page)."""
        self.usergroups: dict[str, list[str]] = {}
        """User group id → member user ids, served by ``usergroups.users.list``."""
        self.invalid: list[Invalid] = []
        """Every Block Kit payload Slack would have refused (see ``blockkit``): leaving the ``async with`` block
        with any here fails the test, so every test that drives the adapter checks every payload. A test that sends
        bad blocks on purpose takes them with ``take_invalid``."""
        self._failures: defaultdict[str, deque[_Failure]] = defaultdict(deque)
        self._drops: defaultdict[str, int] = defaultdict(int)
        self._holds: defaultdict[str, deque[asyncio.Event]] = defaultdict(deque)
        self._ts_counter = itertools.count(1)
        self._view_counter = itertools.count(1)
        self._calls_changed = asyncio.Condition()
        self._connected = asyncio.Event()
        self._sockets: list[web.WebSocketResponse] = []
        self._pending_acks: dict[str, asyncio.Future[JSON]] = {}
        self._runner: web.AppRunner | None = None
        self._origin = ""
        self._methods: dict[str, Callable[[JSON], JSON]] = {
            "auth.test": self._auth_test,
            "apps.connections.open": self._apps_connections_open,
            "chat.postMessage": self._chat_post_message,
            "chat.update": self._chat_update,
            "chat.postEphemeral": self._chat_post_ephemeral,
            "chat.delete": self._chat_delete,
            "chat.getPermalink": self._chat_get_permalink,
            "views.open": self._views_open,
            "views.update": self._views_update,
            "views.push": self._views_open,
            "views.publish": self._views_publish,
            "conversations.replies": self._conversations_replies,
            "conversations.info": self._conversations_info,
            "users.info": self._users_info,
            "reactions.add": self._reactions_add,
            "conversations.open": self._conversations_open,
            "conversations.members": self._conversations_members,
            "usergroups.users.list": self._usergroups_users_list,
        }

    # -- lifecycle -------------------------------------------------------------------------------------------

    async def __aenter__(self) -> Self:
        app = web.Application()
        app.router.add_route("*", "/api/{method}", self._handle_api)
        app.router.add_post("/response", self._handle_response_url)
        app.router.add_get("/link", self._handle_socket)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", 0).start()
        host, port = self._runner.addresses[0][:2]
        self._origin = f"{host}:{port}"
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            await self._close()
        finally:
            if self.invalid:
                report = "; ".join(f"{i.method}: {' | '.join(i.problems)}" for i in self.invalid)
                if exc is None:
                    raise AssertionError(f"Slack would have refused {len(self.invalid)} Block Kit payload(s): "
                                         f"{report}")
                exc.add_note(f"Slack would also have refused these Block Kit payloads: {report}")

    async def _close(self) -> None:
        # Close sockets first: aiohttp's graceful shutdown would otherwise wait on them for 60 s.
        for ws in list(self._sockets):
            await ws.close(code=WSCloseCode.GOING_AWAY, message=b"fake slack shutting down")
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def api_url(self) -> str:
        """The ``base_url`` for ``AsyncWebClient``; it must end with a slash."""
        return f"http://{self._origin}/api/"

    @property
    def socket_url(self) -> str:
        """What ``apps.connections.open`` returns."""
        return f"ws://{self._origin}/link"

    @property
    def response_url(self) -> str:
        """Pass to payload builders so bolt's ``respond()`` posts here (recorded as method ``"response_url"``)."""
        return f"http://{self._origin}/response"

    # -- test controls ---------------------------------------------------------------------------------------

    def fail_next(
        self, method: str, error: str = "ratelimited", *, status: int | None = None, retry_after: int = 1
    ) -> None:
        """Make the next call to ``method`` fail; queued failures are used in order.

        ``ratelimited`` defaults to HTTP 429 with a ``Retry-After`` header, as Slack does; any other error is an
        HTTP 200 ``{"ok": false, "error": error}``.
        """
        if status is None:
            status = 429 if error == "ratelimited" else 200
        self._failures[method].append(_Failure(error, status, retry_after))

    def drop_next(self, method: str) -> None:
        """Carry out the next call to ``method`` (recorded as usual), then drop the connection instead of answering:
        the client sees a disconnect although Slack did the work, as after a network failure mid-response."""
        self._drops[method] += 1

    def hold_next(self, method: str) -> asyncio.Event:
        """Carry out and record the next call to ``method`` at once, but send its answer only once the returned
        event is set: the client is still waiting although Slack did the work (a slow ``views.open``, say)."""
        release = asyncio.Event()
        self._holds[method].append(release)
        return release

    def add_message(self, channel: str, text: str, *, user: str, thread_ts: str | None = None) -> StoredMessage:
        """Seed a message (e.g. the user's mention) so ``conversations.replies`` and ``reactions.add`` find it."""
        message = StoredMessage(channel=channel, ts=self._next_ts(), text=text, user=user, thread_ts=thread_ts)
        self.messages[(channel, message.ts)] = message
        return message

    def take_invalid(self) -> list[Invalid]:
        """The refused payloads so far, no longer counted against the test (for tests that send bad ones)."""
        taken, self.invalid = self.invalid, []
        return taken

    def calls_to(self, method: str) -> list[Call]:
        return [call for call in self.calls if call.method == method]

    async def wait_for_call(self, method: str, predicate: Callable[[Call], bool] | None = None) -> Call:
        """Return the first recorded call to ``method`` matching ``predicate``, waiting for one if needed.

        Earlier calls count, so there is no race between triggering a call and starting to wait for it.
        """
        async with self._calls_changed:
            while True:
                for call in self.calls:
                    if call.method == method and (predicate is None or predicate(call)):
                        return call
                await self._calls_changed.wait()

    async def wait_connected(self) -> None:
        """Wait until a Socket Mode client is connected and has been sent ``hello``."""
        await self._connected.wait()

    async def send_envelope(
        self, type_: EnvelopeType, payload: JSON, *, accepts_response_payload: bool | None = None
    ) -> JSON:
        """Push an envelope to the newest Socket Mode connection and return the app's ack message.

        The ack is ``{"envelope_id": ...}`` plus ``"payload"`` when the listener acked with a body. Like Slack,
        ``accepts_response_payload`` defaults to false for ``events_api`` and true otherwise. Waits for a
        connection first; raises ``ConnectionError`` if the socket closes before the ack.
        """
        await self.wait_connected()
        envelope_id = str(uuid.uuid4())
        if accepts_response_payload is None:
            accepts_response_payload = type_ != "events_api"
        envelope: JSON = {
            "envelope_id": envelope_id,
            "type": type_,
            "payload": payload,
            "accepts_response_payload": accepts_response_payload,
        }
        if type_ == "events_api":
            envelope |= {"retry_attempt": 0, "retry_reason": ""}
        ack: asyncio.Future[JSON] = asyncio.get_running_loop().create_future()
        self._pending_acks[envelope_id] = ack
        try:
            await self._sockets[-1].send_json(envelope)
            return await ack
        finally:
            del self._pending_acks[envelope_id]

    # -- HTTP and websocket handlers -------------------------------------------------------------------------

    async def _handle_api(self, request: web.Request) -> web.Response:
        method = request.match_info["method"]
        args = await _read_args(request)
        auth = request.headers.get("Authorization", "")
        token = auth.removeprefix("Bearer ") if auth.startswith("Bearer ") else None
        status, body, headers = self._answer(method, args, token)
        peer = request.transport.get_extra_info("peername") if request.transport is not None else None
        await self._record(Call(method, args, token, status, body, int(peer[1]) if peer else 0))
        if self._holds[method]:
            await self._holds[method].popleft().wait()
        if self._drops[method] and request.transport is not None:
            self._drops[method] -= 1
            request.transport.close()
        return web.json_response(body, status=status, headers=headers)

    async def _handle_response_url(self, request: web.Request) -> web.Response:
        body = await request.json()
        problems = payload_problems("response_url", body) if isinstance(body, dict) else []
        if problems:
            self.invalid.append(Invalid("response_url", tuple(problems)))
        await self._record(Call("response_url", body, None, 400 if problems else 200, {"ok": not problems}))
        return web.Response(text="invalid_blocks" if problems else "ok", status=400 if problems else 200)

    async def _handle_socket(self, request: web.Request) -> web.WebSocketResponse:
        ws = web.WebSocketResponse()
        await ws.prepare(request)
        self._sockets.append(ws)
        hello = {
            "type": "hello",
            "num_connections": len(self._sockets),
            "debug_info": {"host": "applink-fake", "approximate_connection_time": 18060},
            "connection_info": {"app_id": APP_ID},
        }
        try:
            await ws.send_json(hello)
            self._connected.set()
            async for msg in ws:
                if msg.type is WSMsgType.TEXT:
                    self._on_ack(json.loads(msg.data))
        finally:
            self._sockets.remove(ws)
            if not self._sockets:
                self._connected.clear()
                for pending in self._pending_acks.values():
                    if not pending.done():
                        pending.set_exception(ConnectionError("Socket Mode connection closed before the ack"))
        return ws

    def _on_ack(self, message: JSON) -> None:
        self.acks.append(message)
        payload = message.get("payload")
        problems = ack_problems(payload) if isinstance(payload, dict) else []
        if problems:  # Slack shows the person an error in the modal; the test hears of it on exit
            self.invalid.append(Invalid("ack", tuple(problems)))
        pending = self._pending_acks.get(message.get("envelope_id", ""))
        if pending is not None and not pending.done():
            pending.set_result(message)

    async def _record(self, call: Call) -> None:
        self.calls.append(call)
        async with self._calls_changed:
            self._calls_changed.notify_all()

    def _answer(self, method: str, args: JSON, token: str | None) -> tuple[int, JSON, dict[str, str]]:
        """Status, JSON body and headers for one API call, after injected failures and argument checks."""
        if self._failures[method]:
            failure = self._failures[method].popleft()
            headers = {"Retry-After": str(failure.retry_after)} if failure.status == 429 else {}
            return failure.status, {"ok": False, "error": failure.error}, headers
        handler = self._methods.get(method)
        try:
            if handler is None:
                raise _ApiError("unknown_method")
            if token is None:
                raise _ApiError("not_authed")
            missing = [name for name in _REQUIRED.get(method, ()) if name not in args]
            if missing:
                raise _ApiError("invalid_arguments", f"[ERROR] missing required field: {missing[0]}")
            problems = payload_problems(method, args)
            if problems:
                self.invalid.append(Invalid(method, tuple(problems)))
                # Slack answers a bad view with `invalid_arguments` and a bad message with `invalid_blocks`, each
                # with `[ERROR] … [json-pointer:…]` lines in `response_metadata.messages`.
                raise _ApiError("invalid_arguments" if method in VIEW_METHODS else "invalid_blocks",
                                *(f"[ERROR] {p}" for p in problems))
            return 200, handler(args | {"token": token}), {}
        except _ApiError as e:
            body: JSON = {"ok": False, "error": e.error}
            if e.details:
                body["response_metadata"] = {"messages": list(e.details)}
            return 200, body, {}

    # -- Web API methods -------------------------------------------------------------------------------------

    def _auth_test(self, args: JSON) -> JSON:
        return {
            "ok": True,
            "url": "https://fake-slack.invalid/",
            "team": "Fake Team",
            "user": "bridge-bot",
            "team_id": TEAM_ID,
            "user_id": BOT_USER_ID,
            "bot_id": BOT_ID,
            "is_enterprise_install": False,
        }

    def _apps_connections_open(self, args: JSON) -> JSON:
        if not str(args["token"]).startswith("xapp-"):
            raise _ApiError("not_allowed_token_type")
        return {"ok": True, "url": self.socket_url}

    def _chat_post_message(self, args: JSON) -> JSON:
        if not any(args.get(key) for key in ("text", "blocks", "attachments")):
            raise _ApiError("no_text")
        thread_ts = args.get("thread_ts")
        message = StoredMessage(
            channel=str(args["channel"]),
            ts=self._next_ts(),
            text=str(args.get("text", "")),
            blocks=args.get("blocks") or [],
            thread_ts=str(thread_ts) if thread_ts else None,
        )
        self.messages[(message.channel, message.ts)] = message
        return {"ok": True, "channel": message.channel, "ts": message.ts, "message": message.to_api()}

    def _chat_update(self, args: JSON) -> JSON:
        message = self._message(args["channel"], args["ts"])
        if "text" in args:
            message.text = str(args["text"])
        if "blocks" in args:
            message.blocks = args["blocks"]
        return {
            "ok": True,
            "channel": message.channel,
            "ts": message.ts,
            "text": message.text,
            "message": message.to_api(),
        }

    def _chat_post_ephemeral(self, args: JSON) -> JSON:
        return {"ok": True, "message_ts": self._next_ts()}

    def _chat_delete(self, args: JSON) -> JSON:
        message = self._message(args["channel"], args["ts"])
        del self.messages[(message.channel, message.ts)]
        return {"ok": True, "channel": message.channel, "ts": message.ts}

    def _chat_get_permalink(self, args: JSON) -> JSON:
        """The workspace URL (``auth.test``'s) + ``archives/<channel>/p<ts without the dot>``; a reply in a thread
        gets ``?thread_ts=<parent>&cid=<channel>``, as Slack documents."""
        message = self._message(args["channel"], args["message_ts"])
        permalink = f"https://fake-slack.invalid/archives/{message.channel}/p{message.ts.replace('.', '')}"
        if message.thread_ts is not None and message.thread_ts != message.ts:
            permalink += f"?thread_ts={message.thread_ts}&cid={message.channel}"
        return {"ok": True, "channel": message.channel, "permalink": permalink}

    def _views_open(self, args: JSON) -> JSON:
        """``views.open`` and ``views.push``: each opened view gets a fresh id."""
        view_id = f"V{next(self._view_counter):08d}"
        return {"ok": True, "view": self._store_view(view_id, _view_arg(args))}

    def _views_update(self, args: JSON) -> JSON:
        view_id = args.get("view_id")
        if view_id is None:
            external_id = args.get("external_id")
            view_id = next(
                (v["id"] for v in self.views.values() if external_id and v["external_id"] == external_id), None
            )
        old = self.views.get(str(view_id))
        if old is None:
            raise _ApiError("not_found")
        if "hash" in args and args["hash"] != old["hash"]:
            raise _ApiError("hash_conflict")
        return {"ok": True, "view": self._store_view(old["id"], _view_arg(args))}

    def _views_publish(self, args: JSON) -> JSON:
        view_id = f"V{next(self._view_counter):08d}"
        return {"ok": True, "view": self._store_view(view_id, {"type": "home"} | _view_arg(args))}

    def _conversations_replies(self, args: JSON) -> JSON:
        channel, ts = str(args["channel"]), str(args["ts"])
        thread = [m for m in self.messages.values() if m.channel == channel and ts in (m.ts, m.thread_ts)]
        if not thread:
            raise _ApiError("thread_not_found")
        thread.sort(key=lambda m: m.ts)
        return {"ok": True, "messages": [m.to_api() for m in thread], "has_more": False}

    def _conversations_info(self, args: JSON) -> JSON:
        channel = str(args["channel"])
        kind = channel[:1]
        return {
            "ok": True,
            "channel": {
                "id": channel,
                "name": f"channel-{channel.lower()}",
                "is_channel": kind == "C",
                "is_group": kind == "G",
                "is_im": kind == "D",
                "is_private": kind in ("G", "D"),
                "is_member": True,
            },
        }

    def _users_info(self, args: JSON) -> JSON:
        user_id = str(args["user"])
        real_name = self.users.get(user_id)
        if real_name is None:
            raise _ApiError("user_not_found")
        name = real_name.lower().replace(" ", ".")
        profile = {"real_name": real_name, "display_name": name}
        user = {
            "id": user_id,
            "team_id": TEAM_ID,
            "name": name,
            "real_name": real_name,
            "is_bot": False,
            "profile": profile,
        }
        return {"ok": True, "user": user}

    def _reactions_add(self, args: JSON) -> JSON:
        message = self._message(args["channel"], args["timestamp"])
        name = str(args["name"])
        if name in message.reactions:
            raise _ApiError("already_reacted")
        message.reactions.append(name)
        return {"ok": True}

    def _conversations_open(self, args: JSON) -> JSON:
        """A DM with one person: the same ``D…`` channel every time (Slack returns the existing one)."""
        users = str(args["users"])
        if "," in users:
            raise _ApiError("not_implemented", "[ERROR] the fake opens DMs with one person only")
        if users not in self.users:
            raise _ApiError("user_not_found")
        return {"ok": True, "channel": {"id": f"D{users}", "is_im": True, "user": users}}

    def _conversations_members(self, args: JSON) -> JSON:
        channel = str(args["channel"])
        if channel not in self.members:
            raise _ApiError("channel_not_found")
        start = int(str(args.get("cursor") or 0))
        page = self.members[channel][start:start + 2]
        more = start + 2 < len(self.members[channel])
        return {"ok": True, "members": page, "response_metadata": {"next_cursor": str(start + 2) if more else ""}}

    def _usergroups_users_list(self, args: JSON) -> JSON:
        group = str(args["usergroup"])
        if group not in self.usergroups:
            raise _ApiError("no_such_subteam")
        return {"ok": True, "users": list(self.usergroups[group])}

    # -- helpers ---------------------------------------------------------------------------------------------

    def _next_ts(self) -> str:
        """Slack-style message timestamps that increase by 100 µs per message: ``1700000000.000100``, …"""
        micros = next(self._ts_counter) * 100
        return f"{1_700_000_000 + micros // 1_000_000}.{micros % 1_000_000:06d}"

    def _message(self, channel: Any, ts: Any) -> StoredMessage:
        message = self.messages.get((str(channel), str(ts)))
        if message is None:
            raise _ApiError("message_not_found")
        return message

    def _store_view(self, view_id: str, view: JSON) -> JSON:
        """Fill in the fields Slack adds to a view, keeping ``root_view_id`` across updates."""
        old = self.views.get(view_id, {})
        stored: JSON = {
            "type": "modal",
            "blocks": [],
            "private_metadata": "",
            "callback_id": "",
            "external_id": "",
            "state": {"values": {}},
            "clear_on_close": False,
            "notify_on_close": False,
            **view,
            "id": view_id,
            "team_id": TEAM_ID,
            "app_id": APP_ID,
            "bot_id": BOT_ID,
            "hash": f"{self._next_ts()}.fakehash",
            "root_view_id": old.get("root_view_id", view_id),
            "previous_view_id": None,
        }
        self.views[view_id] = stored
        return stored


async def _read_args(request: web.Request) -> JSON:
    """Merge query, form and JSON arguments: slack_sdk uses all three depending on the method."""
    args: JSON = dict(request.query)
    if request.content_type == "application/json":
        body = await request.json()
        if isinstance(body, dict):
            args.update(body)
    else:
        args.update(await request.post())
    for key in _JSON_FIELDS:
        value = args.get(key)
        if isinstance(value, str):
            with contextlib.suppress(ValueError):  # else leave it as sent; the handler rejects what it cannot use
                args[key] = json.loads(value)
    return args


def _view_arg(args: JSON) -> JSON:
    view = args["view"]
    if not isinstance(view, dict):
        raise _ApiError("invalid_arguments", "[ERROR] failed to parse view")
    return view
