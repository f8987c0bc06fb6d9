"""The chat port: the only way the core talks to a chat platform.

Adapters (console, Slack, Matrix) and the test fake implement `ChatPort`. The core calls it; it never calls back
into the core except through the `Inbound` sink it was given (`Host.handle_message`, `Host.decide`). Methods take no
timeouts: the broker owns every deadline.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from bridge.model import (
    Actor,
    CardRef,
    ConversationKey,
    DecisionIn,
    Interaction,
    MessageIn,
    MessageRef,
    Outcome,
    StatusView,
)

if TYPE_CHECKING:
    from bridge.broker import DecisionResult


class ChatPort(Protocol):
    """What the core needs from a chat platform."""

    platform: str
    """The platform name the adapter uses in `ConversationKey.platform` and `Actor.platform`."""

    async def post_card(self, interaction: Interaction) -> CardRef:
        """Show an interaction in its conversation, labelled with the server and the person it waits for."""
        ...

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        """Bring a card to its final state: no more buttons, the outcome and who decided shown."""
        ...

    async def send(self, conversation: ConversationKey, text: str) -> MessageRef:
        """Post a plain message. The core marks nothing up: adapters escape `text` for their platform."""
        ...

    async def notify(self, conversation: ConversationKey, actor: Actor, text: str) -> None:
        """Tell one person something privately where the platform allows (ephemeral), else in the conversation."""
        ...

    async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
        """Post the status line of a running tool call."""
        ...

    async def update_status(self, ref: MessageRef, status: StatusView) -> None:
        """Edit a status line in place (progress, done, stopped)."""
        ...


class Inbound(Protocol):
    """What adapters call on the core. Both return quickly: long work runs in the host's own tasks."""

    async def handle_message(self, message: MessageIn) -> None:
        """A person wrote something addressed to the bot: a command or an agent turn."""
        ...

    async def decide(self, decision: DecisionIn) -> DecisionResult:
        """A person decided on a card. The result says whether it counted (adapters may show field errors)."""
        ...

    def waiting_for(self, actor: Actor) -> list[tuple[Interaction, CardRef | None]]:
        """Open interactions this person may decide, for a 'what needs me' view."""
        ...


class Adapter(ChatPort, Protocol):
    """A chat adapter the CLI can run: a chat port that also serves its platform's events until cancelled.

    Each adapter package (`adapters.console`, `adapters.slack`, `adapters.matrix`) exposes
    `create(host, settings, config) -> Adapter`, where `settings` is its block under `chat:` in the config. The CLI
    imports it by name, attaches it to the host and runs `serve()` in the host's lifetime. `serve` returning means
    the adapter has ended by itself (the console's input closed).
    """

    async def serve(self) -> None: ...
