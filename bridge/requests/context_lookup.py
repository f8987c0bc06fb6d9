"""Who a server's requests are shown as and who may answer them: server labels, approvers, request contexts.

`resolve` is the `ContextSource` of the handler table: a legacy server request belongs to the call open on its
session (legacy sessions run one call at a time), or else to the session's conversation.
"""

from __future__ import annotations

from mcp.client import ClientRequestContext

from bridge.config.file import Config
from bridge.door.model import Actor, ConversationKey, ServerLabel
from bridge.requests.request_context import RequestContext
from bridge.servers.mcp_session import Session, related_task
from bridge.servers.sessions import SessionPool
from bridge.text.plain import shorten


class Audience:
    def __init__(self, config: Config, pool: SessionPool) -> None:
        self._config = config
        self._pool = pool

    def resolve(self, context: ClientRequestContext) -> RequestContext | None:
        session = self._pool.by_client(context.session)
        if session is None:
            return None
        task = related_task(context.meta)
        info = session.call_for_task(task) if task is not None else None
        info = info or session.context_for_request()
        conversation = info.conversation if info else session.conversation
        if conversation is None:
            return None
        return self.context(session.server.name, session, conversation, info.requester if info else None,
                            info.tool if info else "", url_elicitations=session.url_elicitations,
                            task=f"{info.tool} (task {shorten(task, 40)})" if info and task else "")

    def label(self, server: str, session: Session | None) -> ServerLabel:
        """The configured name (ours) and the title: configured, or else the one the server reports (theirs)."""
        cfg = self._config.servers.get(server)
        if cfg is not None and cfg.title:
            return ServerLabel(server, cfg.title)  # the server's own title is not even looked at
        info = session.client.server_info if session is not None and session.client is not None else None
        return ServerLabel(server, shorten(info.title or info.name or "", 60) if info is not None else "")

    def approvers(self, server: str, *requesters: Actor | None) -> frozenset[str]:
        """The requester(s) and the people of the server's own rule (who may also stop its calls)."""
        cfg = self._config.servers.get(server)
        configured = frozenset(cfg.approvers.people) if cfg else frozenset()
        return configured | {r.key for r in requesters if r is not None}

    def context(self, server: str, session: Session | None, conversation: ConversationKey, requester: Actor | None,
                tool: str = "", *, pending_call: str | None = None, input_key: str | None = None,
                url_elicitations: dict[str, str] | None = None, park: bool = False, note: str = "",
                task: str = "") -> RequestContext:
        return RequestContext(conversation, self.label(server, session), requester, self.approvers(server, requester),
                              tool, pending_call, input_key, url_elicitations, self._config.servers.get(server),
                              park, note, task)
