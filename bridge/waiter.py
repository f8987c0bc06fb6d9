"""One card the broker waits on: the interaction, its card and private copies, and how its decision stands (claimed in
memory, then recorded in the store)."""

from __future__ import annotations

from dataclasses import dataclass, field

import anyio

from bridge.model import Actor, CardRef, Interaction, Outcome
from bridge.routing import Copy
from bridge.storage import AuditRow


@dataclass(slots=True)
class Waiter:
    interaction: Interaction
    durable: bool
    card: CardRef | None = None
    outcome: Outcome | None = None
    """Claimed in memory: the first writer wins."""
    done: anyio.Event = field(default_factory=anyio.Event)
    copies: list[Copy] = field(default_factory=list)
    wake: anyio.Event = field(default_factory=anyio.Event)
    """Set when the outcome is settled or an approval counted: the waiting task looks again."""
    approvals: list[AuditRow] = field(default_factory=list)
    """Approvals counted in memory whose audit rows the waiting task has yet to write."""
    final: Outcome | None = None
    """The outcome as stored: `outcome`, or another worker's if its claim came first."""
    recorded: anyio.Event = field(default_factory=anyio.Event)
    """Set once the claim has been to the store (`final` is None if the store failed)."""
    lost: bool = False
    """The claim in memory lost to one made elsewhere (another worker's decision or expiry)."""
    answered_early: Actor | None = None
    """Whose claim was answered before it was durable (`decide_nowait`): told if it then loses."""

    def copy(self, interaction_id: str) -> Copy | None:
        return next((c for c in self.copies if c.interaction.id == interaction_id), None)
