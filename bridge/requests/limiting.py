"""The bounds of `bridge.safety.limits` applied where server requests come in and cards go out.

Two thin layers, wired by the host:

- `guard` wraps each handler of the handler table as the SDK callback a session gets (both eras go through it):
  over `server_requests_per_minute` the request is refused at once, and a `LimitExceeded` raised further in (a card
  over its bound) becomes the protocol error the server gets.
- `asker` wraps the broker as the handlers' `Asker`: a card over its bound (per conversation, person or call) is
  never posted; `LimitExceeded` is raised instead. A tool approval, asked outside any server request, ends its call
  the same way (`LimitExceeded` is an `InputRefused`).

Either way the conversation gets a short notice, at most one a minute for each bound, so a server that floods gets
errors and the people in the conversation one line.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from mcp.client import ClientRequestContext
from mcp.types import ErrorData

from bridge.cards.chat import Say
from bridge.cards.held import Parked
from bridge.door.model import ConversationKey, Interaction, Outcome
from bridge.errors import INVALID_REQUEST, LimitExceeded
from bridge.requests.request_context import CURRENT, Asker, ContextSource
from bridge.safety.limits import CardKeys, Limits, OpenCards
from bridge.safety.ratelimit import RateLimiter

NOTICE_WINDOW = 60.0

Handler = Callable[[ClientRequestContext, Any], Awaitable[Any]]
"""A handler of the table as the SDK calls it (the elicitation, sampling and roots objects)."""


class Bounds:
    def __init__(self, limits: Limits, contexts: ContextSource, say: Say) -> None:
        self.limits = limits
        self._contexts = contexts
        self._say = say
        self.cards = OpenCards(limits)
        self._requests = RateLimiter(limits.server_requests_per_minute)
        self._notices = RateLimiter(1, NOTICE_WINDOW)
        self.parked: dict[tuple[str, str], CardKeys] = {}
        """The counted cards of parked interactions, by (pending call, input key), until they end."""

    def asker(self, inner: Asker) -> Asker:
        return _BoundedAsker(self, inner)

    def release_parked(self, pending_call: str, input_key: str) -> None:
        """A parked card has ended: it stops counting."""
        keys = self.parked.pop((pending_call, input_key), None)
        if keys is not None:
            self.cards.release(keys)

    def restored(self, interaction: Interaction, pending_call: str, input_key: str) -> None:
        """A parked card taken up again after a restart: it counts (admitted then, never refused now) until it
        ends, so a server cannot pass its bounds by outliving a restart."""
        keys = card_keys(interaction, pending_call)
        self.cards.add(keys)
        self.parked[(pending_call, input_key)] = keys

    def guard(self, server: str, handler: Handler) -> Guarded:
        return Guarded(self, server, handler)

    async def refuse(self, conversation: ConversationKey | None, bound: str, why: str, notice: str) -> ErrorData:
        """The error for a request over `bound` (`why` it was refused), after telling the conversation `notice` (once
        a minute per bound)."""
        if conversation is not None and self._notices.allow((conversation.id(), bound)):
            await self._say(conversation, notice)
        return ErrorData(code=INVALID_REQUEST, message=f"Refused by the bridge: {why}")

    async def admit_request(self, server: str, context: ClientRequestContext) -> ErrorData | None:
        if self._requests.allow(server):
            return None
        ctx = CURRENT.get() or self._contexts.resolve(context)
        label = ctx.server.text() if ctx is not None else server
        limit = self.limits.server_requests_per_minute
        return await self.refuse(ctx.conversation if ctx else None, f"rate:{server}",
                                 f"more than {limit} requests a minute",
                                 f"{label} asked for people more than {limit} times a minute; its requests are "
                                 "refused for now.")


def card_keys(interaction: Interaction, pending_call: str | None) -> CardKeys:
    conversation = interaction.conversation.id()
    # A legacy session runs one call at a time, so its conversation, server and tool name the call.
    call = pending_call or f"{conversation}|{interaction.server.name}|{interaction.tool}"
    return CardKeys(conversation, interaction.requester.key if interaction.requester else None, call)


class Guarded:
    """One handler as a session's SDK callback, inside the bounds."""

    def __init__(self, bounds: Bounds, server: str, handler: Handler) -> None:
        self._bounds = bounds
        self._server = server
        self.handler = handler
        """The handler itself: the same object for every session of both eras."""

    async def __call__(self, context: ClientRequestContext, params: Any = None) -> Any:
        refused = await self._bounds.admit_request(self._server, context)
        if refused is not None:
            return refused
        try:
            return await self.handler(context, params)
        except LimitExceeded as exc:
            return exc.error


class _BoundedAsker:
    def __init__(self, bounds: Bounds, inner: Asker) -> None:
        self._bounds = bounds
        self._inner = inner

    async def ask(self, interaction: Interaction, *, pending_call: str | None = None,
                  input_key: str | None = None, park: bool = False) -> Outcome:
        keys = card_keys(interaction, pending_call)
        why = self._bounds.cards.take(keys)
        if why is not None:
            error = await self._bounds.refuse(
                interaction.conversation, f"cards:{why}", why,
                f"{interaction.server.text()} asked for more than the bridge shows at once ({why}), so it was "
                "refused. Answer or cancel what is waiting (`pending`).")
            raise LimitExceeded(error)
        slot = (pending_call, input_key) if park and pending_call is not None and input_key is not None else None
        if slot is not None:
            # Counted as parked from before its card goes out: its end may be reported (`release_parked`) before
            # `Parked` gets here, and must find it.
            self._bounds.parked[slot] = keys
        kept = False
        try:
            return await self._inner.ask(interaction, pending_call=pending_call, input_key=input_key, park=park)
        except Parked:
            # The card stays open with nobody waiting: it counts until the broker reports it ended (`release_parked`,
            # which may have come already).
            kept = slot is not None
            raise
        finally:
            if not kept:
                if slot is None:
                    self._bounds.cards.release(keys)
                else:
                    self._bounds.release_parked(*slot)
