"""The apps offered in chat: one `AppView` per tool result whose tool has an app, and the offer of it.

A view holds what the app page needs (which conversation, server and tool, the call's arguments and result, the
resource's address) and lives in memory until it expires: it is not worth a store row, since an app shown again
after a restart is one call away. A view of a conversation's own session (a 2025-11-25 server, or `scope:
conversation`) ends with that session: the app's state on the server is gone with it. The app's HTML is read from
the server when the page first asks for it, through the conversation's session, and kept with the view. At most
`MAX_VIEWS` are kept: the oldest go first.
"""

from __future__ import annotations

import logging
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from mcp.types import CallToolResult

from bridge.cards.chat import Outbound
from bridge.config.file import Config
from bridge.door.model import Actor, AppOffer, ConversationKey, ServerLabel
from bridge.errors import BridgeError
from bridge.servers import apps_extension
from bridge.servers.mcp_session import Session, SessionState
from bridge.web.apps import meta

logger = logging.getLogger(__name__)

MAX_VIEWS = 1000
_ENDED = (SessionState.CLOSED, SessionState.GONE)


@dataclass(frozen=True, slots=True)
class AppResource:
    """A view's app as read from its server: the HTML and the policy it declares."""

    html: str
    csp: Mapping[str, Any]
    policy: str
    """The sandbox's Content-Security-Policy, built from `csp` (`bridge.web.apps.csp`)."""


@dataclass(eq=False)
class AppView:
    id: str
    conversation: ConversationKey
    server: str
    label: ServerLabel
    tool: str
    tool_info: dict[str, Any]
    """The tool as its server listed it (JSON), for the app's host context."""
    resource_uri: str
    arguments: dict[str, Any]
    result: dict[str, Any]
    requester: Actor | None
    ends_at: float
    session: Session | None = None
    """The conversation's own session the call ran on: the view ends with it (None for a server's pooled sessions,
    which keep no state of a conversation's)."""
    resource: AppResource | None = field(default=None)


class AppViews:
    """Views by id, and the offer of a new one in its conversation."""

    def __init__(self, config: Config, outbound: Outbound, *, lifetime: float | None = None,
                 clock: Callable[[], float] = time.time) -> None:
        self._config = config
        self._out = outbound
        self._clock = clock
        self.lifetime = config.http.app_link_lifetime if lifetime is None else lifetime
        self._views: OrderedDict[str, AppView] = OrderedDict()

    def enabled(self, server: str) -> bool:
        cfg = self._config.servers.get(server)
        return cfg is not None and apps_extension.offered(self._config, cfg)

    def get(self, view_id: str) -> AppView | None:
        """A view still open: not expired, and its session (if it has one of its own) not ended."""
        view = self._views.get(view_id)
        if view is None:
            return None
        if view.ends_at <= self._clock() or (view.session is not None and view.session.state in _ENDED):
            del self._views[view_id]
            return None
        return view

    async def offer(self, conversation: ConversationKey, requester: Actor | None, label: ServerLabel, tool: Any,
                    arguments: Mapping[str, Any], result: CallToolResult,
                    session: Session | None = None) -> AppView | None:
        """Keep a view of a tool result and offer its app in the conversation, when the tool has one (and apps are
        on for its server). A platform failure is logged: the result itself has been reported already."""
        uri = meta.resource_uri(tool)
        if uri is None or not self.enabled(label.name) or not meta.for_model(tool):
            return None
        view = AppView(secrets.token_urlsafe(12), conversation, label.name, label, tool.name,
                       tool.model_dump(mode="json", by_alias=True, exclude_none=True), uri, dict(arguments),
                       result.model_dump(mode="json", by_alias=True, exclude_none=True), requester,
                       self._clock() + self.lifetime, session if session is not None and session.slot is None else None)
        self._views[view.id] = view
        while len(self._views) > MAX_VIEWS:
            self._views.popitem(last=False)
        title = tool.title if isinstance(getattr(tool, "title", None), str) else ""
        try:
            await self._out.port_for(conversation).offer_app(
                conversation, AppOffer(view.id, label, tool.name, requester, title or ""))
        except BridgeError as exc:
            logger.warning("could not offer the app of %s.%s: %s", label.name, tool.name, exc)
        return view
