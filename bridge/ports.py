"""The chat port: the only way the core talks to a chat platform.

Adapters (console, Slack, Matrix) and the test fake implement `ChatPort`. The core calls it; it never calls back
into the core except through the `Inbound` door it was given: adapters hold nothing else of the core (no host,
broker or store; an import-linter contract keeps it so). Methods take no
timeouts: the broker owns every deadline.
"""

from __future__ import annotations

from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Protocol

import anyio

from bridge.model import (
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
        (`Inbound.app_link`), or the link sent to the requester privately where the platform has no such button."""
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
class RestorableCard:
    """An open card of a durable (2026-era) request that outlived the last run, for an adapter to re-attach to."""

    interaction: Interaction
    card: CardRef


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
    """The one door from adapters into the core. Calls return quickly: long work runs in the core's own tasks."""

    async def handle_message(self, message: MessageIn) -> None:
        """A person wrote something addressed to the bot: a command or an agent turn, run in the background."""
        ...

    async def run_message(self, message: MessageIn) -> None:
        """The same, returning when the work is finished (the console runs one command at a time)."""
        ...

    async def decide(self, decision: DecisionIn) -> DecisionResult:
        """A person decided on a card. The result says whether it counted; refusals and late clicks have already
        been told to the person."""
        ...

    def claim(self, decision: DecisionIn) -> DecisionResult:
        """Decide without awaiting and without any notice, for adapters that must answer at once and show the
        verdict themselves (a Slack modal submission). The claim is in memory; it is made durable right after, and
        should another worker have decided first, the person is told then, as for a late click."""
        ...

    async def check(self, interaction_id: str, actor: Actor) -> DecisionResult:
        """Whether `actor` could decide now, without deciding (before opening a dialog). A refusal or a late click
        gets the usual notice."""
        ...

    def open_interaction(self, interaction_id: str) -> Interaction | None:
        """The interaction if it is open and waited on in this process."""
        ...

    async def known_interaction(self, interaction_id: str) -> Interaction | None:
        """The interaction, open or finished, if the bridge has ever seen it."""
        ...

    def open_interactions(self, conversation: ConversationKey | None = None) -> list[Interaction]:
        """Interactions open in this process, in one conversation or everywhere."""
        ...

    def waiting_for(self, actor: Actor) -> list[tuple[Interaction, CardRef | None]]:
        """Open interactions this person may decide, for a 'what needs me' view."""
        ...

    async def next_words(self, conversation: ConversationKey, actor: Actor, before: list[str]) -> list[str]:
        """What may follow these words of a command (without the platform's prefix): command words, the servers
        this conversation may use, a server's tool names after `call SERVER`. For a terminal's Tab completion."""
        ...

    async def wait_open(self, interaction_id: str) -> Interaction:
        """Wait until an interaction is open here (posted, or resumed after a restart)."""
        ...

    async def restorable_cards(self, platform: str) -> list[RestorableCard]:
        """Open durable cards of this platform left by the last run (to be resumed by the core)."""
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

    def web_link(self, interaction_id: str, actor: Actor) -> str | None:
        """A one-time address where `actor` can fill this card's form in a browser, or None (web forms are not
        configured, the card has no form, or it is not theirs to answer). Whoever holds the link answers as that
        person, so adapters send it to them privately only: never in the room."""
        ...

    async def web_link_anywhere(self, interaction_id: str, actor: Actor) -> str | None:
        """`web_link`, also for a card another worker holds (several workers on one store): any worker may receive
        the click that asks for a link, and any worker serves the link."""
        ...

    async def open_anywhere(self, interaction_id: str) -> Interaction | None:
        """The interaction if it is open: waited on in this process, or held by another worker of a shared store
        (decisions on it reach that worker through the store)."""
        ...

    def app_link(self, view_id: str, actor: Actor) -> str | None:
        """A link of `actor`'s own to an app offered in chat (`ChatPort.offer_app`), or None when the app has ended.
        It works in one browser only: send it to that person privately, never in the room."""
        ...

    def web_forms_enabled(self) -> bool:
        """Whether cards may offer "Fill in on the web" (`web_link` can give links), so adapters show the offer
        only when it can be kept."""
        ...


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
