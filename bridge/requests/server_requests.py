"""The handler table: one object per kind of server request, registered once for every session of both eras.

Passing a handler declares the capability, so policy "deny" is applied here, once: a server that may not sample or
see roots is not told it could, and the SDK refuses such a request on either era. The same instances answer legacy
server->client requests and the 2026 input requests the tool-call owner dispatches through the SDK's callback table
(`ClientSession.dispatch_input_request`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from mcp.types import SamplingCapability, SamplingToolsCapability

from bridge.requests.elicitation import Elicitation
from bridge.requests.limiting import Bounds
from bridge.requests.roots import RootsKeeper
from bridge.requests.sampling import Sampler
from bridge.requests.server_notices import ServerNotices
from bridge.requests.task_requests import ServedTasks
from bridge.requests.tool_approval import ToolApproval
from bridge.servers.mcp_session import Callbacks, Session


@dataclass(frozen=True, slots=True)
class HandlerTable:
    elicitation: Elicitation
    sampling: Sampler
    roots: RootsKeeper
    tool_approval: ToolApproval
    notices: ServerNotices
    bounds: Bounds | None = None
    """The `limits:` bounds every server request passes (`bridge.requests.limiting`); none in tests that build a bare
    table."""
    tasks: ServedTasks | None = None
    """Runs the elicitation and sampling requests a server sends as tasks (`bridge.requests.task_requests`)."""

    def callbacks(self, session: Session) -> Callbacks:
        cfg = session.server
        log_level = None if cfg.log_level == "off" else cfg.log_level
        sampling = cfg.sampling.approval != "deny"
        tools = SamplingCapability(tools=SamplingToolsCapability()) if self.sampling.supports_tools else None
        notices = self.notices.for_session(session)
        bounds = self.bounds

        def guarded(handler: Any) -> Any:
            return bounds.guard(cfg.name, handler) if bounds is not None else handler

        return Callbacks(
            elicitation=guarded(self.elicitation),
            sampling=guarded(self.sampling) if sampling else None,
            sampling_capabilities=tools if sampling else None,
            list_roots=guarded(self.roots) if cfg.roots.approval != "deny" else None,
            logging=notices.on_log if log_level else None,
            log_level=log_level,
            message_handler=notices.on_message,
            tasks=self.tasks.for_server(cfg.name) if self.tasks is not None else None,
        )
