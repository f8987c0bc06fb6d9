"""The Slack adapter: composes the parts and serves bolt's `AsyncApp` over Socket Mode or HTTP.

The parts, one concept each: `port` (the host's `ChatPort`), `gate` (the allow-list middleware), `intake`
(messages and the slash command), `clicks` (buttons), `modals` (forms in modals), `home` (the App Home tab),
`people` (names), `threads` (the bot's threads), `background` (everything done after an ack, and work that outlives
a request), `responses` (where to reach a person privately) and `client` (the one place Web API clients are made,
sharing one HTTP session while serving, and where their failures become bridge errors). A failed Web API call never
ends the adapter.

Listeners ack at once and hand the rest to the background: the ack path is the allow-list, reading the payload and,
for a modal submission, the decision claimed in memory.
"""

from __future__ import annotations

import logging

import anyio
from aiohttp import web
from slack_bolt.adapter.socket_mode.async_handler import AsyncSocketModeHandler
from slack_bolt.async_app import AsyncApp

from adapters.slack import http_edge, listeners, reaching, translate
from adapters.slack.background import Background
from adapters.slack.clicks import Clicks
from adapters.slack.client import clients
from adapters.slack.directory import Directory
from adapters.slack.gate import AllowList
from adapters.slack.home import HomeTab
from adapters.slack.intake import Intake
from adapters.slack.modals import Modals
from adapters.slack.people import People
from adapters.slack.port import SlackPort
from adapters.slack.responses import ResponseUrls
from adapters.slack.settings import SlackSettings
from adapters.slack.threads import BotThreads
from bridge.config.file import Config
from bridge.door.model import Actor, AppOffer, CardRef, ConversationKey, Interaction, MessageRef, Outcome, StatusView
from bridge.door.ports import Inbound
from bridge.errors import AdapterError
from bridge.web.guard import ConnectionGuard, GuardedProtocol, bind

logger = logging.getLogger(__name__)


class SlackAdapter:
    """A `ChatPort` for Slack plus the bolt app that turns Slack's events into `Inbound` calls. Run `serve()`."""

    platform = translate.PLATFORM
    private_cards = True  # ephemeral messages

    def __init__(self, inbound: Inbound, settings: SlackSettings, config: Config) -> None:
        self.settings = settings
        self.clients = clients(settings)
        self.background = Background()
        threads = BotThreads(inbound.adapter_state(translate.PLATFORM))
        people = People(self.clients.bot)
        self.directory = Directory(self.clients.bot)
        response_urls = ResponseUrls()
        self.home = HomeTab(inbound, self.clients, self.background)
        self.modals = Modals(inbound, self.clients, people, self.background)
        self.port = SlackPort(self.clients, threads, self.background, self.modals.close_all, self.home.refresh,
                              response_urls, inbound.web_forms_enabled)
        intake = Intake(inbound, config.conversation_scope, settings.slash_command, people, self.port, threads,
                        self.background)
        allow = AllowList(settings, intake.wanted, self.port.tell, self.background, response_urls)
        # bolt authorizes every request with `authorize`, which answers from one shared auth.test (bolt's own
        # single-workspace authorization would make one per request until the first answer comes).
        reaching.quiet_bolt()  # before the app is made: it warns about SLACK_BOT_TOKEN as it is made
        self.app = AsyncApp(client=self.clients.for_bolt, authorize=self.clients.authorizer(),
                            signing_secret=settings.signing_secret,
                            request_verification_enabled=settings.mode == "http")
        listeners.register(self.app, settings.slash_command, allow, intake,
                           Clicks(inbound, people, self.modals, self.port, self.background), self.modals, self.home)
        self.ready = anyio.Event()
        """Set once the adapter receives events (socket connected or HTTP server listening)."""
        self.http_url = ""
        self._socket: AsyncSocketModeHandler | None = None

    # -- ChatPort (the port's) -----------------------------------------------------------------------------------

    async def post_card(self, interaction: Interaction) -> CardRef:
        return await self.port.post_card(interaction)

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        await self.port.finish_card(ref, interaction, outcome)

    async def send(self, conversation: ConversationKey, text: str) -> MessageRef:
        return await self.port.send(conversation, text)

    async def notify(self, conversation: ConversationKey, actor: Actor, text: str) -> None:
        await self.port.notify(conversation, actor, text)

    async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
        return await self.port.post_status(conversation, status)

    async def update_status(self, ref: MessageRef, status: StatusView) -> None:
        await self.port.update_status(ref, status)

    async def offer_app(self, conversation: ConversationKey, offer: AppOffer) -> None:
        await self.port.offer_app(conversation, offer)

    async def update_card(self, ref: CardRef, interaction: Interaction) -> None:
        await self.port.update_card(ref, interaction)

    async def direct(self, user_id: str) -> ConversationKey | None:
        return await self.directory.direct(user_id)

    async def members(self, conversation: ConversationKey) -> frozenset[str] | None:
        return await self.directory.members(conversation)

    async def group_members(self, group: str) -> frozenset[str]:
        return await self.directory.group_members(group)

    # -- serving -------------------------------------------------------------------------------------------------

    async def readiness(self) -> str | None:
        if not self.ready.is_set():
            return "not connected to Slack yet" if self.settings.mode == "socket" else "not listening yet"
        if self._socket is not None and not await self._socket.client.is_connected():
            return "the Socket Mode connection is down (reconnecting)"
        return None

    async def serve(self) -> None:
        """Receive Slack's events until cancelled: over Socket Mode (default) or on the HTTP path."""
        async with self.clients.shared_session(), self.background.running():
            # Who the bot is (and the workspace's address for card links), asked before the first event, so no
            # ack waits for it; every request's authorization then answers from memory. Without a network it is
            # tried again, further apart each time, before anything else is opened.
            refused = await reaching.until_reached(self.clients.auth)
            if refused is not None:
                logger.warning("Slack auth.test failed (%s); it is tried again with the first event", refused)
            if self.settings.mode == "http":
                await self._serve_http()
            else:
                await self._serve_socket()

    async def _serve_socket(self) -> None:
        handler = AsyncSocketModeHandler(self.app, app_token=self.settings.app_token,
                                         web_client=self.clients.socket_mode())
        try:  # the handler has its own HTTP session from here on: closed however this ends, connected or not
            await handler.connect_async()  # type: ignore[no-untyped-call]  # bolt leaves it unannotated
            self._socket = handler
            self.ready.set()
            await anyio.sleep_forever()
        finally:
            with anyio.CancelScope(shield=True):
                await handler.close_async()  # type: ignore[no-untyped-call]

    async def _serve_http(self) -> None:
        http = self.settings.http
        # The connection guard sheds idle and half-sent requests (aiohttp's keep-alive timer does not cover a body
        # that never ends) and keeps the accept loop quiet when descriptors run out; http_edge refuses what Slack
        # did not sign before bolt reads it.
        guard = ConnectionGuard(http.connections, "Slack HTTP listener")
        app = self.app.web_app(path=http.path, port=http.port)
        app.middlewares.append(http_edge.middleware(self.settings.signing_secret, guard))
        runner = web.AppRunner(app, access_log=None, keepalive_timeout=http.connections.idle_timeout)
        await runner.setup()
        try:
            try:
                sock = bind(http.host, http.port)
            except OSError as exc:
                raise AdapterError(f"chat.slack.http: cannot listen on {http.host}:{http.port}: "
                                   f"{exc.strerror or exc}") from None
            with sock:
                host, port = sock.getsockname()[:2]
                self.http_url = f"http://{host}:{port}{http.path}"
                async with anyio.create_task_group() as tg:
                    server = runner.server
                    assert server is not None  # set up above
                    tg.start_soon(guard.serve, sock, lambda: GuardedProtocol(server(), guard))
                    logger.info("Slack events, interactivity and %s served at %s", self.settings.slash_command,
                                self.http_url)
                    self.ready.set()
        finally:
            with anyio.CancelScope(shield=True):
                await runner.cleanup()
