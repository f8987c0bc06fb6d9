"""uvicorn's h11 protocol, reporting to a `ConnectionGuard` where each connection stands.

h11 knows exactly how far the client has got: `their_state` is IDLE until a request head is whole (with bytes of it
possibly waiting in `trailing_data`), SEND_BODY while its body comes, and DONE once it is read. uvicorn starts its own
keep-alive timer only after a first response, so the guard's deadlines cover the rest.
"""

from __future__ import annotations

import asyncio
from typing import Any

import h11
from uvicorn.config import Config
from uvicorn.protocols.http.h11_impl import H11Protocol
from uvicorn.server import ServerState

from bridge.web.guard import ConnectionGuard


class GuardedH11Protocol(H11Protocol):
    def __init__(self, guard: ConnectionGuard, config: Config, server_state: ServerState,
                 app_state: dict[str, Any]) -> None:
        super().__init__(config, server_state, app_state)
        self.guard = guard

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.guard.opened(transport)

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._report()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._report()

    def connection_lost(self, exc: Exception | None) -> None:
        super().connection_lost(exc)
        self.guard.closed(self.transport)

    def _report(self) -> None:
        state = self.conn.their_state
        if state is h11.SEND_BODY or (state is h11.IDLE and self.conn.trailing_data[0]):
            self.guard.reading(self.transport)
        elif state is h11.IDLE:
            self.guard.idle(self.transport)
        else:  # DONE (the app answers), MUST_CLOSE, CLOSED or ERROR (uvicorn closes it)
            self.guard.busy(self.transport)
