"""Helpers for driving the bridge through a real Synapse: a `Person` (a second nio client) and a running bridge."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

import aiohttp
import anyio
import pytest
from nio import (
    AsyncClient,
    AsyncClientConfig,
    Event,
    InviteMemberEvent,
    KeysQueryResponse,
    KeysUploadResponse,
    MatrixRoom,
    RoomCreateResponse,
    RoomMemberEvent,
    RoomRedactResponse,
    RoomSendResponse,
)

from adapters.matrix import MatrixAdapter, create
from adapters.matrix.render import MARK, POLL_RESPONSE
from bridge.config.file import Config, ServerConfig
from bridge.door.model import MessageIn
from bridge.host import Host
from bridge.storage import AsyncStore, open_store
from tests.harness.hosts import patient
from tests.harness.synapse import RegisteredUser, Synapse

WAIT = patient(30.0)
MEGOLM = "m.megolm.v1.aes-sha2"
EVERYTHING = Path(__file__).resolve().parents[3] / "tests/npm/node_modules/@modelcontextprotocol/server-everything/" \
                                                  "dist/index.js"

Predicate = Callable[[Any], bool]


def register(synapse: Synapse, name: str) -> RegisteredUser:
    username = f"{name}-{uuid.uuid4().hex[:8]}"
    return synapse.register(username, f"{username}-password")


def content(event: Any) -> Mapping[str, Any]:
    source = getattr(event, "source", None) or {}
    c = source.get("content") if isinstance(source, Mapping) else None
    return c if isinstance(c, Mapping) else {}


def mark(event: Any) -> Mapping[str, Any]:
    m = content(event).get(MARK)
    return m if isinstance(m, Mapping) else {}


def part(name: str, field: str | None = None, *, after: int = 0) -> Callable[[int, Any], bool]:
    def check(index: int, event: Any) -> bool:
        m = mark(event)
        return index >= after and m.get("part") == name and (field is None or m.get("field") == field)
    return check


def body(event: Any) -> str:
    return str(content(event).get("body", ""))


def edit_of(event_id: str) -> Callable[[int, Any], bool]:
    def check(index: int, event: Any) -> bool:
        rel = content(event).get("m.relates_to") or {}
        return rel.get("rel_type") == "m.replace" and rel.get("event_id") == event_id
    return check


class Person:
    """A person in a Matrix client: sends messages, votes and reactions, and sees everything the bot posts."""

    def __init__(self, client: Any, room_id: str = "") -> None:
        self.client = client
        self.user_id: str = client.user_id
        self.room_id = room_id
        self.seen: list[Any] = []
        self.room_of: dict[str, str] = {}
        """The room each seen event came in, by event id."""
        client.add_event_callback(self._record, (Event, InviteMemberEvent))

    async def _record(self, room: MatrixRoom, event: Any) -> None:
        self.seen.append(event)
        event_id = getattr(event, "event_id", None)
        if event_id:
            self.room_of[event_id] = room.room_id

    async def wait(self, predicate: Callable[[int, Any], bool]) -> Any:
        """Sync until an event matching `predicate(index, event)` has arrived; return the first such event."""
        with anyio.fail_after(patient(WAIT)):
            while True:
                for index, event in enumerate(self.seen):
                    if predicate(index, event):
                        return event
                await self.client.sync(timeout=5_000)

    async def send(self, event_type: str, data: dict[str, Any]) -> str:
        if self.client.olm is not None and self.client.should_query_keys:
            assert isinstance(await self.client.keys_query(), KeysQueryResponse)
        response = await self.client.room_send(self.room_id, event_type, data, ignore_unverified_devices=True)
        assert isinstance(response, RoomSendResponse), response
        return str(response.event_id)

    async def say(self, text: str, *, thread: str | None = None, latest: str | None = None,
                  reply_to: str | None = None) -> str:
        data: dict[str, Any] = {"msgtype": "m.text", "body": text}
        if thread:
            data["m.relates_to"] = {"rel_type": "m.thread", "event_id": thread, "is_falling_back": True,
                                    "m.in_reply_to": {"event_id": latest or thread}}
        elif reply_to:
            data["m.relates_to"] = {"m.in_reply_to": {"event_id": reply_to}}
        return await self.send("m.room.message", data)

    async def vote(self, poll_id: str, answers: list[str]) -> str:
        return await self.send(POLL_RESPONSE, {"m.relates_to": {"rel_type": "m.reference", "event_id": poll_id},
                                               POLL_RESPONSE: {"answers": answers}})

    async def react(self, event_id: str, key: str) -> str:
        return await self.send("m.reaction", {"m.relates_to": {"rel_type": "m.annotation", "event_id": event_id,
                                                               "key": key}})

    async def unreact(self, reaction_id: str) -> None:
        """What Element does on a second tap of one's own reaction pill: redact the reaction event."""
        response = await self.client.room_redact(self.room_id, reaction_id)
        assert isinstance(response, RoomRedactResponse), response

    async def notifications(self) -> list[dict[str, Any]]:
        """The person's notifications as the homeserver's push rules made them (`GET /notifications`), newest
        first."""
        out: list[dict[str, Any]] = []
        url = f"{self.client.homeserver}/_matrix/client/v3/notifications"
        headers = {"Authorization": f"Bearer {self.client.access_token}"}
        async with aiohttp.ClientSession(headers=headers) as http:
            params: dict[str, Any] = {"limit": 100}
            while True:
                async with http.get(url, params=params, raise_for_status=True) as response:
                    data = await response.json()
                out.extend(data.get("notifications", []))
                if not data.get("next_token"):
                    return out
                params["from"] = str(data["next_token"])

    async def create_room(self, invite: list[str], *, encrypted: bool) -> str:
        state = [{"type": "m.room.encryption", "state_key": "", "content": {"algorithm": MEGOLM}}] if encrypted \
            else []
        created = await self.client.room_create(name="bridge test", invite=invite, initial_state=state)
        assert isinstance(created, RoomCreateResponse), created
        self.room_id = str(created.room_id)
        return self.room_id

    async def join(self, room_id: str) -> None:
        await self.wait(lambda i, e: isinstance(e, InviteMemberEvent) and e.state_key == self.user_id)
        await self.client.join(room_id)
        self.room_id = room_id

    async def wait_joined(self, user_id: str) -> None:
        await self.wait(lambda i, e: isinstance(e, RoomMemberEvent) and e.state_key == user_id
                        and e.membership == "join")


@asynccontextmanager
async def person(synapse: Synapse, name: str, store: Path | None) -> AsyncIterator[Person]:
    user = register(synapse, name)
    encrypted = store is not None
    if store is not None:
        store.mkdir(parents=True, exist_ok=True)  # noqa: ASYNC240 (a test set-up step, instant on tmpfs)
    client = AsyncClient(synapse.base_url, user.user_id, device_id=user.device_id,
                         store_path=str(store) if store else "",
                         config=AsyncClientConfig(encryption_enabled=encrypted, store_sync_tokens=encrypted,
                                                  max_limit_exceeded=0, max_timeouts=2))
    try:
        client.restore_login(user.user_id, user.device_id, user.access_token)
        if encrypted:
            assert isinstance(await client.keys_upload(), KeysUploadResponse)
        yield Person(client)
    finally:
        await client.close()


def matrix_block(synapse: Synapse, bot: RegisteredUser | tuple[str, str], store: Path, *,
                 allowed: list[str] | None = None, e2ee: str = "optional") -> dict[str, Any]:
    block: dict[str, Any] = {"homeserver": synapse.base_url, "store_path": str(store), "e2ee": e2ee}
    if isinstance(bot, RegisteredUser):
        block.update(user_id=bot.user_id, access_token=bot.access_token, device_id=bot.device_id)
    else:
        block.update(user_id=bot[0], password=bot[1])
    if allowed is not None:
        block["allowed_users"] = allowed
    return block


def everything() -> ServerConfig:
    return ServerConfig(name="everything", command="node", args=(str(EVERYTHING), "stdio"))


@dataclass
class Bridge:
    host: Host
    adapter: MatrixAdapter
    store: AsyncStore


@asynccontextmanager
async def bridge(config: Config, block: Mapping[str, Any], db: Path | str,
                 worker_id: str | None = None) -> AsyncIterator[Bridge]:
    """A host and the Matrix adapter, running until the block ends (the host stops first, so that its cards are
    finished while the adapter can still send). `db`: a SQLite file or a Postgres URL (then name each worker)."""
    store = await open_store(db, worker_id=worker_id)
    host = Host(config, store)
    adapter = create(host, block, config)
    host.attach(adapter)
    try:
        async with anyio.create_task_group() as tg:
            tg.start_soon(adapter.serve)
            with anyio.fail_after(patient(WAIT)):
                await adapter.ready.wait()
            async with host:
                yield Bridge(host, adapter, store)
            tg.cancel_scope.cancel()
    finally:
        await store.aclose()


def raw_result(text: str) -> dict[str, Any]:
    """server-everything's `Raw result: {json}` from the bot's result message."""
    assert "Raw result:" in text, text
    data: dict[str, Any] = json.loads(text.split("Raw result:", 1)[1].strip())
    return data


async def open_room(p: Person, bot_id: str, *, encrypted: bool) -> None:
    """A fresh room of `p`'s with the bot invited, once the bot has joined."""
    await p.create_room([bot_id], encrypted=encrypted)
    await p.wait_joined(bot_id)


class Room(NamedTuple):
    ada: Person
    running: Bridge
    bot_id: str


@asynccontextmanager
async def ada_with_the_bot(synapse: Synapse, tmp_path: Path, config: Config, *,
                           encrypted: bool = False) -> AsyncIterator[Room]:
    """How most end-to-end tests start: a fresh bot account, the bridge running as it with `config` (its store the
    file `config.store` names), and Ada (a second client; with her own crypto store when `encrypted`) in a new room
    with the bot."""
    bot = register(synapse, "bot")
    async with person(synapse, "ada", tmp_path / "ada" if encrypted else None) as ada, \
            bridge(config, matrix_block(synapse, bot, tmp_path / "bot"), Path(config.store)) as running:
        await open_room(ada, bot.user_id, encrypted=encrypted)
        yield Room(ada, running, bot.user_id)


def record_messages(running: Bridge, monkeypatch: pytest.MonkeyPatch) -> list[MessageIn]:
    """Every message the adapter hands to the host, in order (the adapter handles events one at a time)."""
    handled: list[MessageIn] = []
    original = running.host.handle_message

    async def record(message: MessageIn) -> None:
        handled.append(message)
        await original(message)

    monkeypatch.setattr(running.host, "handle_message", record)
    return handled
