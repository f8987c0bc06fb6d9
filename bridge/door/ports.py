"""The chat port: the only way the core talks to a chat platform.

Adapters (console, Slack, Matrix) and the test fake implement `ChatPort`. The core calls it; it never calls back
into the core except through the `Inbound` door it was given: adapters hold nothing else of the core (no host,
broker or store; an import-linter contract keeps it so). Methods take no
timeouts: the broker owns every deadline.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol, overload, runtime_checkable

import anyio

from bridge.door.model import (
    Actor,
    AppOffer,
    CardRef,
    ConversationKey,
    DecisionIn,
    DecisionResult,
    Interaction,
    MessageIn,
    MessageRef,
    Outcome,
    StatusView,
)


class ChatPort(Protocol):
    """What the core needs from a chat platform."""

    platform: str
    """The platform name the adapter uses in `ConversationKey.platform` and `Actor.platform`."""
    private_cards: bool
    """Whether `post_card` shows a `private` card to its one approver only, inside its conversation (Slack: an
    ephemeral message). Where not, the core posts private cards in a direct message instead (`direct`)."""

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

    async def offer_app(self, conversation: ConversationKey, offer: AppOffer) -> None:
        """Offer the app of a tool result (MCP Apps): an Open button whose link each person gets privately
        (`AppLinks.app_link`), or the link sent to the requester privately where the platform has no such button."""
        ...

    async def update_card(self, ref: CardRef, interaction: Interaction) -> None:
        """Show an open card's progress: the approvals so far (`interaction.approvals`) and who still may."""
        ...

    async def direct(self, user_id: str) -> ConversationKey | None:
        """The direct-message conversation between the bot and one person of this platform, opened if needed (a
        private copy of a card is posted there); None where the platform has none."""
        ...

    async def members(self, conversation: ConversationKey) -> frozenset[str] | None:
        """The user ids who can read a conversation (its channel's members), or None when the platform cannot say."""
        ...

    async def group_members(self, group: str) -> frozenset[str]:
        """The user ids in a platform's own group of people (a Slack user group), cached by the adapter; empty where
        the platform has no such groups."""
        ...

CLEANUP_TIMEOUT = 10.0
"""How long finishing a card may take at the end of an interaction (also during shutdown); adapters that finish
cards in their own tasks keep to the same bound."""


@dataclass(frozen=True, slots=True)
class CardView:
    """A card as the core knows it: its interaction, and whether it still takes answers. Where it is held (this
    process or another worker of a shared store) is the core's business: a decision reaches it either way."""

    interaction: Interaction
    open: bool
    """Waiting for an answer (a decision on it may count); false once it has ended or while it is being restored."""
    card: CardRef | None = None
    """Where it was posted, when the core knows (listed cards: waiting for a person, or left open by the last run)."""


class AdapterState(Protocol):
    """Small persistent key-value state an adapter owns (Slack's bot threads, say), in its own namespace."""

    async def get(self, key: str) -> str | None: ...

    async def set(self, key: str, value: str) -> None: ...


class Leadership(Protocol):
    """Held leadership of a role across the bridge's workers (`Inbound.leadership`)."""

    name: str
    lost: anyio.Event
    """Set if leadership was lost while held (the store stopped vouching for it): stop leading at once."""


class Inbound(Protocol):
    """The one door from adapters into the core (eight methods). Calls return quickly: long work runs in the core's
    own tasks. No method says where a card is held: with several workers on one store, the core takes a decision to
    the worker holding its card itself."""

    async def handle_message(self, message: MessageIn, *, wait: bool = False) -> None:
        """A person wrote something addressed to the bot: a command or an agent turn, run in the background, or
        awaited to its end with `wait` (the console runs one command at a time)."""
        ...

    @overload
    async def decide(self, decision: DecisionIn) -> DecisionResult: ...

    @overload
    async def decide(self, decision: DecisionIn, *, ack_within: float) -> DecisionResult | None: ...

    async def decide(self, decision: DecisionIn, *, ack_within: float | None = None) -> DecisionResult | None:
        """A person decided on a card. The result says whether it counted; refusals and late clicks have already
        been told to the person.

        `ack_within`: for platforms that must answer at once and show the verdict themselves (a Slack modal
        submission, acked within 3 seconds): the verdict without any notice if it comes within that many seconds,
        else None (the decision goes on, and a late or refused person is told privately when it ends)."""
        ...

    async def check(self, interaction_id: str, actor: Actor, *, web_link: bool = False) -> DecisionResult:
        """Whether `actor` could decide now, without deciding (before opening a dialog). A refusal or a late click
        gets the usual notice. With `web_link`, a CLAIMED result carries the person's one-time web-form address
        (`DecisionResult.web_link`): whoever holds it answers as that person, so adapters send it to them privately
        only, never in the room."""
        ...

    async def cards(self, *, interaction_id: str | None = None, waiting_for: Actor | None = None,
                    left_open_on: str | None = None, wait: float = 0.0) -> list[CardView]:
        """Look cards up, by one of: `interaction_id` (that card, open or ended, if the bridge has ever seen it;
        `wait`: after a restart, up to that many seconds for the core to resume it, and open only if it did),
        `waiting_for` (open cards this person may decide, by name: a 'what needs me' view), `left_open_on` (a
        platform's open durable cards left by the last run, for its adapter to re-attach to; the core resumes
        them)."""
        ...

    async def stop_call(self, call_id: str, actor: Actor) -> bool:
        """Stop a running tool call (a Stop button); refused privately for people who may not."""
        ...

    def adapter_state(self, namespace: str) -> AdapterState:
        """Persistent key-value state owned by one adapter."""
        ...

    def leadership(self, name: str) -> AbstractAsyncContextManager[Leadership]:
        """Wait until this worker leads the role `name` (one leader across every worker on the store: a Matrix
        account's sync loop, say), and hold it for the block. With one process it is granted at once."""
        ...

    def web_forms_enabled(self) -> bool:
        """Whether cards may offer "Fill in on the web" (`check(..., web_link=True)` can give links), so adapters
        show the offer only when it can be kept."""
        ...


@runtime_checkable
class Completions(Protocol):
    """Beside the door, for terminals: a host that implements it offers Tab completion of command words (the console
    checks `isinstance(inbound, Completions)`). Kept off `Inbound`, which says what every adapter needs."""

    async def next_words(self, conversation: ConversationKey, actor: Actor, before: list[str]) -> list[str]:
        """What may follow these words of a command (without the platform's prefix): command words, the servers
        this conversation may use, a server's tool names after `call SERVER`."""
        ...


@runtime_checkable
class AppLinks(Protocol):
    """Beside the door, for MCP Apps: a host that implements it gives each person a link of their own to an app offered
    with a tool result (`ChatPort.offer_app`). Kept off `Inbound`: an adapter that never receives an app offer needs
    nothing of it."""

    def app_link(self, view_id: str, actor: Actor) -> str | None:
        """A link of `actor`'s own to an app offered in chat, or None when the app has ended. It works in one browser
        only: send it to that person privately, never in the room."""
        ...


def app_link(inbound: Inbound, view_id: str, actor: Actor) -> str | None:
    """`actor`'s own link to an offered app, or None where the host offers no apps (or the app has ended)."""
    return inbound.app_link(view_id, actor) if isinstance(inbound, AppLinks) else None


async def look_up(inbound: Inbound, interaction_id: str, *, wait: float = 0.0) -> CardView | None:
    """One card by id (`Inbound.cards`), or None if the bridge has never seen it."""
    found = await inbound.cards(interaction_id=interaction_id, wait=wait)
    return found[0] if found else None


class Adapter(ChatPort, Protocol):
    """A chat adapter the CLI can run: a chat port that also serves its platform's events until cancelled.

    Each adapter package (`adapters.console`, `adapters.slack`, `adapters.matrix`) exposes
    `create(inbound, settings, config) -> Adapter`, where `settings` is its block under `chat:` in the config. The CLI
    imports it by name, attaches it to the host and runs `serve()` in the host's lifetime. `serve` returning means
    the adapter has ended by itself (the console's input closed).
    """

    async def serve(self) -> None: ...

    async def readiness(self) -> str | None:
        """None while the adapter is connected to its platform and receives its events, else a short reason why not
        (shown on /readyz; never a secret). Answers at once: it reads state the adapter keeps."""
        ...
