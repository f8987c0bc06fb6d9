"""Who a sign-in is for and where to ask them, carried from a session to the shared OAuth provider.

An OAuth provider is shared by every session using one account (`OAuthClients`: one per server URL and identity),
so that a refresh by one session is seen by the others; its sign-in callback therefore cannot know which session
(which conversation) needs it. `SessionAuth` is the per-session face of the shared provider: while the provider's
flow runs for one of this session's requests, `ASKING` holds this session's person and conversation, and a chat
consent reads it there. The flow runs in the task that sends the request, so the value reaches the callback.
"""

from __future__ import annotations

import contextvars
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

import httpx2

from bridge.door.model import Actor, ConversationKey


@dataclass(frozen=True, slots=True)
class Asking:
    """The person whose account a session uses, and the conversation they used it from last."""

    person: Actor
    conversation: ConversationKey


ASKING: contextvars.ContextVar[Asking | None] = contextvars.ContextVar("bridge_oauth_asking", default=None)


class SessionAuth(httpx2.Auth):
    """One session's use of a shared provider (`inner`): each request's flow runs with `ASKING` set to `where()`."""

    def __init__(self, inner: httpx2.Auth, where: Callable[[], Asking | None]) -> None:
        self.inner = inner
        self._where = where
        self.requires_request_body = inner.requires_request_body
        self.requires_response_body = inner.requires_response_body

    async def async_auth_flow(self, request: httpx2.Request) -> AsyncGenerator[httpx2.Request, httpx2.Response]:
        # Set, not reset: the value belongs to the task sending this session's requests, and each flow sets it anew.
        ASKING.set(self._where())
        flow = self.inner.async_auth_flow(request)
        try:
            outgoing = await flow.__anext__()
            while True:
                response = yield outgoing
                outgoing = await flow.asend(response)
        except StopAsyncIteration:
            return
        finally:
            await flow.aclose()
