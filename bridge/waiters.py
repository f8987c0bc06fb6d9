"""What the broker holds for one open interaction (`Waiter`), how a parked one is announced (`Parked`), and the pure
wording of who decides and of a quorum card's end."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field, replace

import anyio

from bridge.model import Actor, CardRef, Interaction, Outcome
from bridge.routing import Copy
from bridge.store import AuditRow

ParkedHandler = Callable[[str, str, Outcome], Awaitable[None]]
"""Called with (pending call id, input key, outcome) once a parked interaction has ended and its card is final."""

APPROVED = "approved"
"""The audit outcome of one approval on a card that needs several."""


class Parked(Exception):
    """Raised by `Broker.ask(..., park=True)` once the card is posted: the answer arrives through `on_parked`."""

    def __init__(self, interaction_id: str) -> None:
        super().__init__(interaction_id)
        self.interaction_id = interaction_id


@dataclass(slots=True)
class Waiter:
    interaction: Interaction
    durable: bool
    card: CardRef | None = None
    outcome: Outcome | None = None
    copies: list[Copy] = field(default_factory=list)
    wake: anyio.Event | None = None
    """Set when the outcome is settled or an approval counted (`progressed`): the waiting task looks again. Only a
    waiter with a task waiting on it has one."""
    progressed: bool = False
    parked: tuple[str, str] | None = None
    """(pending call id, input key) of a parked interaction: nobody waits, `on_parked` gets the outcome."""

    def copy(self, interaction_id: str) -> Copy | None:
        return next((c for c in self.copies if c.interaction.id == interaction_id), None)

    def as_copy(self, copy: Copy) -> Interaction:
        """A private copy as it stands now (with the approvals counted on the card)."""
        return replace(copy.interaction, approvals=self.interaction.approvals)

    def poke(self) -> None:
        if self.wake is not None:
            self.wake.set()


def quorum_detail(interaction: Interaction, outcome: Outcome) -> str:
    """The audit detail of a quorum card's end: who approved, of how many."""
    if interaction.required < 2:
        return ""
    approved = ", ".join(a.label() for a in outcome.approvals) or "nobody"
    return f"{outcome.reason + '; ' if outcome.reason else ''}approvals {len(outcome.approvals)} of " \
           f"{interaction.required}: {approved}"


def who_decides(interaction: Interaction) -> str:
    if interaction.approvers and (interaction.requester is None or interaction.requester.key not in
                                  interaction.approvers or len(interaction.approvers) > 1):
        return "the approvers named on it"
    return interaction.requester.label() if interaction.requester else "the approvers"


def approval_row(interaction: Interaction, actor: Actor) -> AuditRow:
    """The audit row of one approval of several (`interaction.approvals` already counting it)."""
    return AuditRow(
        time.time(), interaction.id, interaction.kind.value, interaction.server.name, interaction.conversation.id(),
        APPROVED, actor.key, actor.label(), interaction.requester.key if interaction.requester else None,
        f"approval {len(interaction.approvals)} of {interaction.required}")


def approvals_from(rows: Iterable[AuditRow]) -> tuple[Actor, ...]:
    """Who approved a quorum card so far, read back from its audit rows (after a restart)."""
    return tuple(Actor(row.actor.split(":", 1)[0], row.actor.split(":", 1)[1], row.actor_name or "") for row in rows
                 if row.outcome == APPROVED and row.actor and ":" in row.actor)
