"""Test helpers, shipped with the package so adapter tests and user tests can build a bridge in a few lines.

`FakeChatPort` records what the core posts and lets a test wait for it without sleeping. `host_for` builds a host
around in-process MCP servers (the SDK's `MCPServer`), on a store from `host_store`: `config.store` (`:memory:`), or
wherever `HOST_STORES.target` points (the project's test suite points it at a Postgres database for its second pass).
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any, TypeVar

import anyio

from bridge.config.file import Config, ServerConfig
from bridge.door.model import (
    Actor,
    AppOffer,
    CardRef,
    ConversationKey,
    Interaction,
    MessageRef,
    Outcome,
    StatusView,
)
from bridge.host import Host
from bridge.storage import AsyncStore, open_store

T = TypeVar("T")

TIME_SCALE_VARIABLE = "MCP_BRIDGE_TEST_TIME_SCALE"
"""The one factor every test deadline is multiplied by (default 3). A deadline only bounds a test that hangs: what
it waits for should come far sooner, so a loaded machine (CI beside other jobs, two cores running a whole suite) must
never reach it. Raise it on a slower machine; nothing in a passing run gets slower."""


def time_scale() -> float:
    try:
        scale = float(os.environ.get(TIME_SCALE_VARIABLE, "3"))
    except ValueError:
        raise SystemExit(f"{TIME_SCALE_VARIABLE} must be a number") from None
    return max(scale, 1.0)


_SCALE = time_scale()


def patient(seconds: float) -> float:
    """A test's deadline of `seconds`, scaled by `MCP_BRIDGE_TEST_TIME_SCALE` (see `TIME_SCALE_VARIABLE`)."""
    return seconds * _SCALE

ALICE = Actor("test", "U-alice", "Alice")
BOB = Actor("test", "U-bob", "Bob")
ROOM = ConversationKey("test", "W1", "C1", "T1")


@dataclass(frozen=True, slots=True)
class Posted:
    conversation: ConversationKey
    text: str


class FakeChatPort:
    """A chat platform in memory: every call is recorded; `wait_*` helpers block until something matches."""

    def __init__(self, platform: str = "test", *, private_cards: bool = False) -> None:
        self.platform = platform
        self.private_cards = private_cards
        self.cards: dict[str, Interaction] = {}
        self.finished: dict[str, Outcome] = {}
        self.finish_calls: list[tuple[str, Outcome]] = []
        self.messages: list[Posted] = []
        self.notices: list[tuple[Actor, str]] = []
        self.statuses: dict[str, list[StatusView]] = {}
        self.app_offers: list[tuple[ConversationKey, AppOffer]] = []
        self.updates: list[Interaction] = []
        """Every progress update of an open card (`update_card`), in order."""
        self.present: frozenset[str] | None = None
        """User ids `members` reports for every conversation (None: the platform cannot say)."""
        self.groups: dict[str, frozenset[str]] = {}
        self.fail_posts = False
        self._changed: anyio.Event | None = None
        self._ids = itertools.count(1)

    def _notify_change(self) -> None:
        if self._changed is not None:  # made only while a test waits, so a long bench pays nothing for it
            self._changed.set()
            self._changed = None

    async def wait_for(self, check: Callable[[], T | None]) -> T:
        """Wait until `check()` returns something other than None (wrap in `anyio.fail_after`)."""
        while True:
            value = check()
            if value is not None:
                return value
            if self._changed is None:
                self._changed = anyio.Event()
            await self._changed.wait()

    async def wait_card(self, kind: str | None = None, index: int = 0) -> Interaction:
        def check() -> Interaction | None:
            cards = [c for c in self.cards.values() if kind is None or c.kind.value == kind]
            return cards[index] if len(cards) > index else None
        return await self.wait_for(check)

    async def wait_open_card(self) -> Interaction:
        return await self.wait_for(lambda: next((c for i, c in self.cards.items() if i not in self.finished), None))

    async def wait_finished(self, interaction_id: str) -> Outcome:
        return await self.wait_for(lambda: self.finished.get(interaction_id))

    async def wait_message(self, contains: str) -> str:
        return await self.wait_for(lambda: next((m.text for m in self.messages if contains in m.text), None))

    # -- ChatPort ------------------------------------------------------------------------------------------------

    async def post_card(self, interaction: Interaction) -> CardRef:
        if self.fail_posts:
            from bridge.errors import PlatformAPIError

            raise PlatformAPIError(self.platform, "post_card", "unavailable")
        self.cards[interaction.id] = interaction
        self._notify_change()
        return CardRef(interaction.id, {"n": str(next(self._ids))})

    async def finish_card(self, ref: CardRef, interaction: Interaction, outcome: Outcome) -> None:
        self.finished[interaction.id] = outcome
        self.finish_calls.append((interaction.id, outcome))
        self._notify_change()

    async def send(self, conversation: ConversationKey, text: str) -> MessageRef:
        self.messages.append(Posted(conversation, text))
        self._notify_change()
        return MessageRef(conversation, {"n": str(next(self._ids))})

    async def notify(self, conversation: ConversationKey, actor: Actor, text: str) -> None:
        self.notices.append((actor, text))
        self._notify_change()

    async def post_status(self, conversation: ConversationKey, status: StatusView) -> MessageRef:
        self.statuses[status.call_id] = [status]
        self._notify_change()
        return MessageRef(conversation, {"call": status.call_id})

    async def update_status(self, ref: MessageRef, status: StatusView) -> None:
        self.statuses.setdefault(ref.data["call"], []).append(status)
        self._notify_change()

    async def offer_app(self, conversation: ConversationKey, offer: AppOffer) -> None:
        self.app_offers.append((conversation, offer))
        self._notify_change()

    async def update_card(self, ref: CardRef, interaction: Interaction) -> None:
        self.updates.append(interaction)
        self._notify_change()

    async def direct(self, user_id: str) -> ConversationKey | None:
        return ConversationKey(self.platform, "", f"DM-{user_id}")

    async def members(self, conversation: ConversationKey) -> frozenset[str] | None:
        return self.present

    async def group_members(self, group: str) -> frozenset[str]:
        return self.groups.get(group, frozenset())


def config_for(servers: Mapping[str, Any], **overrides: Any) -> Config:
    """A config whose servers are in-process `MCPServer` objects: `{"name": server}` or `{"name": ServerConfig}`.

    `overrides` may hold Config fields, or `server_<field>` to set a field on every ServerConfig.
    """
    server_fields = {k[len("server_"):]: v for k, v in overrides.items() if k.startswith("server_")}
    config_fields = {k: v for k, v in overrides.items() if not k.startswith("server_")}
    built: dict[str, ServerConfig] = {}
    for name, server in servers.items():
        cfg = server if isinstance(server, ServerConfig) else ServerConfig(name=name, inprocess=server)
        built[name] = replace(cfg, **server_fields)
    return Config(servers=built, store=":memory:", **config_fields)


class HostStores:
    """Where `host_store` opens stores, and the ones it opened (still readable after their host stopped, until
    `close_all`)."""

    def __init__(self) -> None:
        self.target: str | None = None
        """A store for every test host (a `postgresql://` URL, say) instead of each config's `store`."""
        self.opened: list[AsyncStore] = []

    async def close_all(self) -> None:
        opened, self.opened = self.opened, []
        for store in opened:
            await store.aclose()


HOST_STORES = HostStores()


async def host_store(config: Config) -> AsyncStore:
    """A store for a test host: `HOST_STORES.target` if set, else `config.store`. Close with `HOST_STORES.close_all`
    (or leave a `:memory:` one to the garbage collector)."""
    store = await open_store(HOST_STORES.target or config.store)
    HOST_STORES.opened.append(store)
    return store


async def host_for(config: Config, store: AsyncStore | None = None,
                   port: FakeChatPort | None = None, **options: Any) -> tuple[Host, FakeChatPort]:
    """A host with a fake chat port attached (not yet started: use `async with host`), on `store` or a
    `host_store`; `options` are the Host's keyword arguments (`auth`, `prestarts`, ...)."""
    chat = port or FakeChatPort()
    host = Host(config, store or await host_store(config), **options)
    host.attach(chat)
    return host, chat
