"""Who a card reaches: configured groups expanded into people, and private copies for approvers outside the thread.

When a card is posted, the broker asks `prepare` for the people who may decide (the interaction's approvers plus the
members of its groups: config lists, and Slack user groups looked up by the Slack adapter) and for those to ask
privately: every approver but the requester with `notify: dm`, else the approvers who cannot see the conversation
(not members of its channel, or on another platform). Each of those gets a copy of the card in a direct message; the
copy has its own id (`<id>~<n>`, so each platform can index it apart from the original) and a decision on it is a
decision on the original, which is what the thread shows.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Protocol

from bridge.config.team import Group
from bridge.door.model import CardRef, Interaction
from bridge.door.ports import ChatPort
from bridge.errors import AdapterError

logger = logging.getLogger(__name__)

COPY = "~"
MAX_PRIVATE = 25
"""At most this many people are asked privately for one card (a large group is reached through its channel)."""


def base_id(interaction_id: str) -> str:
    """The interaction a card id belongs to: itself, or the original of a private copy."""
    return interaction_id.split(COPY, 1)[0]


class Ports(Protocol):
    def port(self, platform: str) -> ChatPort | None: ...


@dataclass(frozen=True, slots=True)
class Copy:
    """A private copy of a card, in one approver's direct messages."""

    interaction: Interaction
    port: ChatPort
    card: CardRef


class Routing:
    def __init__(self, groups: Mapping[str, Group], ports: Ports) -> None:
        self._groups = groups
        self._ports = ports

    async def prepare(self, interaction: Interaction) -> Interaction:
        """The interaction with its groups' members among the approvers and the people to ask privately. The same
        object when neither adds anything (the usual card: no groups, only the requester decides), since rebuilding
        an interaction is a good part of what a card costs the core."""
        approvers = set(interaction.approvers)
        for name in interaction.groups:
            approvers |= await self.members(name)
        if len(approvers) != len(interaction.approvers):  # the union only grows: same size, same people
            interaction = replace(interaction, approvers=frozenset(approvers))
        asked = tuple(await self._private(interaction))
        return interaction if asked == interaction.asked else replace(interaction, asked=asked)

    async def members(self, name: str) -> set[str]:
        group = self._groups.get(name)
        if group is None:
            return set()
        people = set(group.people)
        slack = self._ports.port("slack") if group.slack_usergroup else None
        if slack is not None:
            try:
                people |= {f"slack:{user}" for user in await slack.group_members(group.slack_usergroup)}
            except AdapterError as exc:
                logger.warning("could not look up the members of group %s: %s", name, exc)
        return people

    async def _private(self, interaction: Interaction) -> list[str]:
        requester = interaction.requester.key if interaction.requester else None
        candidates = sorted(k for k in interaction.approvers if k != requester and ":" in k)
        if not candidates:
            return []
        conversation = interaction.conversation
        if interaction.notify != "dm":
            members: frozenset[str] | None = frozenset()
            port = self._ports.port(conversation.platform)
            if port is not None:
                try:
                    members = await port.members(conversation)
                except AdapterError as exc:
                    logger.warning("could not list who is in %s: %s", conversation.id(), exc)
                    members = None  # unknown: nobody on this platform is asked privately
            prefix = f"{conversation.platform}:"
            candidates = [k for k in candidates if not k.startswith(prefix)
                          or (members is not None and k[len(prefix):] not in members)]
        return [k for k in candidates if self._ports.port(k.split(":", 1)[0]) is not None][:MAX_PRIVATE]

    async def post_copies(self, interaction: Interaction) -> list[Copy]:
        """A copy of the card in each asked person's direct messages (one that cannot be reached is logged)."""
        copies: list[Copy] = []
        for n, key in enumerate(interaction.asked, 1):
            platform, user = key.split(":", 1)
            port = self._ports.port(platform)
            if port is None:
                continue
            try:
                direct = await port.direct(user)
                if direct is None:
                    continue
                copy = replace(interaction, id=f"{interaction.id}{COPY}{n}", conversation=direct,
                               origin=interaction.conversation)
                copies.append(Copy(copy, port, await port.post_card(copy)))
            except AdapterError as exc:
                logger.warning("could not ask %s privately about %s: %s", key, interaction.id, exc)
        return copies
