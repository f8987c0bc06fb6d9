"""One card the broker holds (`Waiter`): the interaction, its card and private copies, and how its decision stands
(claimed in memory, then recorded in the store); and how a parked card is announced (`Parked`) and its end handed on
(`Handoff`). The rules of who may decide, and the audit rows of approvals, are `bridge.cards.decision_rules`'."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import anyio
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream

from bridge.cards.recipients import Copy
from bridge.door.model import Actor, CardRef, Interaction, Outcome
from bridge.storage import AuditRow


@dataclass(frozen=True, slots=True)
class ParkedEnded:
    """A parked interaction has ended: its claim is durable (its card is finished right after). `last`: the
    store says every card of the call's round is answered now and this worker continues the call (exactly one worker
    is told so, whichever claimed the round's last answer)."""

    pending_call: str
    input_key: str
    outcome: Outcome
    last: bool
    interaction: Interaction
    """The interaction as stored (what its receipt names), so the answer needs no read back from the store."""


@dataclass(frozen=True, slots=True)
class RoundClaimed:
    """A claim made here answered the last open card of a stored call's round that is not parked here (a parked
    card another worker holds, or one expired here): the call is this worker's to continue, from the store."""

    pending_call: str


Handoff = ParkedEnded | RoundClaimed
"""What the broker hands the calls layer (over a memory stream it reads in its own tasks: `handoff_stream`)."""


def handoff_stream() -> tuple[MemoryObjectSendStream[Handoff], MemoryObjectReceiveStream[Handoff]]:
    # Unbounded: the broker never waits on the calls layer (one small item per ended parked card).
    return anyio.create_memory_object_stream[Handoff](math.inf)


class Parked(Exception):
    """Raised by `Broker.ask(..., park=True)` once the card is posted: the answer is handed on (`ParkedEnded`)."""

    def __init__(self, interaction_id: str) -> None:
        super().__init__(interaction_id)
        self.interaction_id = interaction_id


@dataclass(slots=True)
class Waiter:
    interaction: Interaction
    durable: bool
    card: CardRef | None = None
    outcome: Outcome | None = None
    """Claimed in memory: the first writer wins."""
    copies: list[Copy] = field(default_factory=list)
    wake: anyio.Event | None = None
    """Set when the outcome is settled or an approval counted: the task waiting on the card (if any) looks again.
    Made by that task: a parked card, which nobody waits on, holds no event (tens of thousands may be parked)."""
    approvals: list[AuditRow] = field(default_factory=list)
    """Approvals counted in memory whose audit rows are yet to be written."""
    final: Outcome | None = None
    """The outcome as stored: `outcome`, or another worker's if its claim came first."""
    unrecorded: list[Outcome] = field(default_factory=list)
    """Claims the store refused (they may have committed all the same, if a connection dropped after the commit)."""
    recorded: bool = False
    """The claim has been to the store (`final` is None if the store failed)."""
    _recorded_event: anyio.Event | None = None
    lost: bool = False
    """The claim in memory lost to one made elsewhere (another worker's decision or expiry)."""
    answered_early: Actor | None = None
    """Whose claim was answered before it was durable (`decide_nowait`): told if it then loses."""
    parked: tuple[str, str] | None = None
    """(pending call id, input key) of a parked interaction: no task waits on it, `on_parked` gets its end."""
    posting: anyio.Event | None = None
    """Set once a parked card's private copies are posted (its end finishes them too); None when nothing is posting."""
    last: bool = False
    """A parked interaction's claim answered the last open card of its round (the store's word): continue here."""
    round_of: str | None = None
    """The stored 2026 call whose round this card asks for (parked or waited on): its claim is the round's
    (`claim_parked`), which takes the round's sending when it answers the round's last card."""

    def woken(self) -> None:
        if self.wake is not None:
            self.wake.set()

    def mark_recorded(self) -> None:
        self.recorded = True
        if self._recorded_event is not None:
            self._recorded_event.set()

    def reopen(self) -> None:
        """The claim could not be recorded: the card is open again (whoever waited was woken by `mark_recorded`)."""
        self.recorded, self._recorded_event = False, None

    async def wait_recorded(self) -> None:
        if not self.recorded:
            if self._recorded_event is None:
                self._recorded_event = anyio.Event()
            await self._recorded_event.wait()

    def copy(self, interaction_id: str) -> Copy | None:
        return next((c for c in self.copies if c.interaction.id == interaction_id), None)
