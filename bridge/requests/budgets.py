"""Token budgets: how much of the model one person and one conversation may use per UTC day.

The agent and sampling count what the provider reports (`LLMResponse.usage`), stored per day and subject, so a
restart forgets nothing. A request is refused once a budget is used up (a single answer may overshoot it: nobody
knows the size of an answer before it comes); the refusal names the budget and when it resets.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

from bridge.config.team import BudgetLimits
from bridge.door.model import Actor, ConversationKey
from bridge.llm import Usage
from bridge.storage.api import UsageStore
from bridge.text.grammar import possessive

DAY = 86400.0


@dataclass(frozen=True, slots=True)
class Standing:
    """One budget today: what it is for, its limit (None: none) and what has been used."""

    subject: str
    label: str
    limit: int | None
    used: int

    @property
    def exhausted(self) -> bool:
        return self.limit is not None and self.used >= self.limit


class Budgets:
    def __init__(self, limits: BudgetLimits, store: UsageStore, clock: Callable[[], float] = time.time) -> None:
        self._limits = limits
        self._store = store
        self.clock = clock
        """Wall-clock seconds; tests move it forward to see a budget reset."""

    def _day(self) -> str:
        return time.strftime("%Y-%m-%d", time.gmtime(self.clock()))

    async def standings(self, conversation: ConversationKey, actor: Actor | None) -> list[Standing]:
        day = self._day()
        out = []
        if actor is not None:
            subject = f"user:{actor.key}"
            out.append(Standing(subject, f"{possessive(actor.label(), start=True)} daily budget", self._limits.per_user,
                                await self._store.usage(day, subject)))
        subject = f"conversation:{conversation.id()}"
        out.append(Standing(subject, "This conversation's daily budget", self._limits.per_conversation,
                            await self._store.usage(day, subject)))
        return out

    async def everyone_today(self) -> list[Standing]:
        """Every person's and conversation's use today that has a row (the operator's `usage`)."""
        out = []
        for subject, used in await self._store.usage_on(self._day()):
            kind, _, who = subject.partition(":")
            limit = self._limits.per_user if kind == "user" else self._limits.per_conversation
            out.append(Standing(subject, f"{who} ({'person' if kind == 'user' else 'conversation'})", limit, used))
        return out

    async def refusal(self, conversation: ConversationKey, actor: Actor | None) -> str | None:
        """Why the model may not be used now for this person here, or None."""
        for standing in await self.standings(conversation, actor):
            if standing.exhausted:
                return (f"{standing.label} of {standing.limit:,} tokens is used up "
                        f"({standing.used:,} today); it resets {self.resets()}.")
        return None

    async def record(self, conversation: ConversationKey, actor: Actor | None, usage: Usage | None) -> None:
        if usage is None or usage.total <= 0:
            return
        subjects = ([f"user:{actor.key}"] if actor is not None else []) + [f"conversation:{conversation.id()}"]
        await self._store.add_usage(self._day(), subjects, usage.total)

    def resets(self) -> str:
        """'at 00:00 UTC, in 3 h 12 min': when today's budgets start again."""
        now = self.clock()
        left = int(DAY - now % DAY)
        hours, minutes = divmod((left + 59) // 60, 60)
        return f"at 00:00 UTC, in {hours} h {minutes:02d} min" if hours else f"at 00:00 UTC, in {minutes} min"

    async def report(self, conversation: ConversationKey, actor: Actor) -> str:
        lines = [standing_line(standing) for standing in await self.standings(conversation, actor)]
        return "Model use today (UTC):\n" + "\n".join(lines) + f"\nBudgets reset {self.resets()}."


def standing_line(standing: Standing) -> str:
    limit = f" of {standing.limit:,}" if standing.limit is not None else " (no limit)"
    return f"• {standing.label}: {standing.used:,}{limit} tokens"
