"""Smoke test for the Synapse harness: two matrix-nio clients talk through a real homeserver.

The same exchange runs in a plain and in an end-to-end encrypted room: alice invites the
bot, the bot joins, alice sends a text message, a poll start and a poll response
(unstable MSC3381 types), and the bot's sync delivers all three (decrypted, when the room
is encrypted).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

# matrix-nio ships no py.typed marker (pyproject: ignore_missing_imports), so its objects are Any here.
from nio import (
    AsyncClient,
    AsyncClientConfig,
    Event,
    InviteMemberEvent,
    JoinResponse,
    KeysQueryResponse,
    KeysUploadResponse,
    MatrixRoom,
    RoomCreateResponse,
    RoomMemberEvent,
    RoomMessageText,
    RoomSendResponse,
    UnknownEvent,
)

from tests.harness.hosts import patient
from tests.harness.synapse import RegisteredUser, Synapse

POLL_START = "org.matrix.msc3381.poll.start"
POLL_RESPONSE = "org.matrix.msc3381.poll.response"
MEGOLM = "m.megolm.v1.aes-sha2"
WAIT = patient(20.0)  # seconds for anything the server should deliver at once


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # nio is asyncio-only


Predicate = Callable[[str, Any], bool]


class Party:
    """A logged-in nio client plus every room event its syncs have delivered."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.user_id: str = client.user_id
        self.seen: list[tuple[str, Any]] = []
        client.add_event_callback(self._record, (Event, InviteMemberEvent))

    async def _record(self, room: MatrixRoom, event: Any) -> None:
        self.seen.append((room.room_id, event))

    async def sync_until(self, predicate: Predicate) -> Any:
        """Long-poll /sync until an event matching ``predicate`` arrives; return it."""
        with anyio.fail_after(patient(WAIT)):
            while True:
                for room_id, event in self.seen:
                    if predicate(room_id, event):
                        return event
                # Returns as soon as the server has anything new for us.
                await self.client.sync(timeout=5_000)

    async def send(self, room_id: str, event_type: str, content: dict[str, Any]) -> str:
        # ignore_unverified_devices: share the room key with devices nobody verified
        # (nio has no cross-signing; without it room_send raises OlmUnverifiedDeviceError).
        response = await self.client.room_send(room_id, event_type, content, ignore_unverified_devices=True)
        assert isinstance(response, RoomSendResponse), response
        event_id: str = response.event_id
        return event_id


@asynccontextmanager
async def party(synapse: Synapse, user: RegisteredUser, store: Path | None) -> AsyncIterator[Party]:
    """A client for a registered user's device; with ``store`` it does E2EE."""
    encrypted = store is not None
    config = AsyncClientConfig(
        encryption_enabled=encrypted,
        store_sync_tokens=encrypted,
        max_limit_exceeded=0,  # the default (None) retries 429s forever
        max_timeouts=2,
    )
    client = AsyncClient(
        synapse.base_url,
        user.user_id,
        device_id=user.device_id,
        store_path=str(store) if store else "",
        config=config,
    )
    try:
        # The admin register API already made a device and token: no login() needed.
        client.restore_login(user.user_id, user.device_id, user.access_token)
        if encrypted:
            assert client.olm is not None
            assert client.should_upload_keys
            assert isinstance(await client.keys_upload(), KeysUploadResponse)
        yield Party(client)
    finally:
        await client.close()


def register(synapse: Synapse, name: str) -> RegisteredUser:
    username = f"{name}-{uuid.uuid4().hex[:8]}"  # one server per session: unique users
    return synapse.register(username, f"{username}-password")


@pytest.mark.anyio
@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "e2ee"])
async def test_message_and_poll_round_trip(synapse: Synapse, tmp_path: Path, encrypted: bool) -> None:
    alice_user, bot_user = register(synapse, "alice"), register(synapse, "bot")
    alice_store = tmp_path / "alice" if encrypted else None
    bot_store = tmp_path / "bot" if encrypted else None
    for store in (alice_store, bot_store):
        if store is not None:
            store.mkdir()

    async with party(synapse, alice_user, alice_store) as alice, party(synapse, bot_user, bot_store) as bot:
        initial_state = (
            [{"type": "m.room.encryption", "state_key": "", "content": {"algorithm": MEGOLM}}] if encrypted else []
        )
        created = await alice.client.room_create(name="smoke", invite=[bot.user_id], initial_state=initial_state)
        assert isinstance(created, RoomCreateResponse), created
        room_id: str = created.room_id

        await bot.sync_until(
            lambda rid, e: (
                rid == room_id
                and isinstance(e, InviteMemberEvent)
                and e.state_key == bot.user_id
                and e.membership == "invite"
            )
        )
        assert isinstance(await bot.client.join(room_id), JoinResponse)

        # Alice must see the join before sending, or the bot's device gets no room key.
        await alice.sync_until(
            lambda rid, e: (
                rid == room_id
                and isinstance(e, RoomMemberEvent)
                and e.state_key == bot.user_id
                and e.membership == "join"
            )
        )
        if encrypted:
            assert alice.client.rooms[room_id].encrypted
            if alice.client.should_query_keys:
                assert isinstance(await alice.client.keys_query(), KeysQueryResponse)

        text_id = await alice.send(room_id, "m.room.message", {"msgtype": "m.text", "body": "hello bot"})
        text = await bot.sync_until(lambda rid, e: getattr(e, "event_id", None) == text_id)
        assert isinstance(text, RoomMessageText), text
        assert (text.sender, text.body, text.decrypted) == (alice.user_id, "hello bot", encrypted)

        start_id = await alice.send(room_id, POLL_START, poll_start_content())
        response_id = await alice.send(
            room_id,
            POLL_RESPONSE,
            {
                "m.relates_to": {"rel_type": "m.reference", "event_id": start_id},
                POLL_RESPONSE: {"answers": ["yes"]},
            },
        )
        start = await bot.sync_until(lambda rid, e: getattr(e, "event_id", None) == start_id)
        response = await bot.sync_until(lambda rid, e: getattr(e, "event_id", None) == response_id)

    for event, event_type in ((start, POLL_START), (response, POLL_RESPONSE)):
        assert isinstance(event, UnknownEvent), event
        assert (event.type, event.sender, event.decrypted) == (event_type, alice.user_id, encrypted)
    poll = start.source["content"][POLL_START]
    assert [answer["id"] for answer in poll["answers"]] == ["yes", "no"]
    vote = response.source["content"]
    assert vote["m.relates_to"] == {"rel_type": "m.reference", "event_id": start_id}
    assert vote[POLL_RESPONSE] == {"answers": ["yes"]}


def poll_start_content() -> dict[str, Any]:
    question = "Approve the tool call?"
    return {
        "org.matrix.msc1767.text": f"{question}\n1. Yes\n2. No",
        "body": f"{question}\n1. Yes\n2. No",
        POLL_START: {
            "kind": "org.matrix.msc3381.poll.disclosed",
            "max_selections": 1,
            "question": {"org.matrix.msc1767.text": question},
            "answers": [
                {"id": "yes", "org.matrix.msc1767.text": "Yes"},
                {"id": "no", "org.matrix.msc1767.text": "No"},
            ],
        },
    }
