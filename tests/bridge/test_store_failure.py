"""A decision the store cannot record is never lost, on both eras: the person is told, the card stays open, the
server hears nothing, and the same click once the store works again counts (claimed, audited, delivered once).

The store really fails: a SQLite file on a tmpfs of its own that is then filled to the last page, so SQLite's own
write gets ENOSPC ("database or disk is full"), as on a full disk; a tmpfs rather than an unwritable file because a
file open for writing stays writable whatever its mode, and root ignores modes anyway (mounting needs root: elsewhere
the test is skipped, saying so). And a Postgres database whose connections are killed mid-decision while it refuses
new ones (`ALLOW_CONNECTIONS false`: this test's database only, so the session's cluster keeps serving the others).
"""

from __future__ import annotations

import errno
import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest

from bench.common import answer_for, bench_server, tag_of
from bridge.config.file import ProtocolEra, ServerConfig
from bridge.door.model import Actor, ConversationKey, DecisionIn, MessageIn, Status, Verdict
from bridge.host import Host
from bridge.storage import AsyncStore, open_store
from bridge.text.presentation import STORE_FAILED
from tests.harness.hosts import FakeChatPort, config_for, host_for, patient
from tests.harness.postgres import PostgresCluster

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

STDIO_SCRIPT = Path(__file__).parent.parent / "servers" / "mrtr_stdio.py"
ERAS: list[ProtocolEra] = ["legacy", "2026-07-28"]
WAIT = 60.0  # seconds for what should happen at once (a loaded machine runs three sessions and a store)
ROOMS = [ConversationKey("test", "W1", f"C{i}", "T1") for i in range(3)]


def person(conversation: ConversationKey) -> Actor:
    return Actor("test", f"U-{conversation.channel}", f"Person {conversation.channel}")


@dataclass(frozen=True)
class Peer:
    """A real MCP server with a `book` tool that asks one form and reports what came back, tagged."""

    name: str
    server: Any
    answer: Callable[[str], dict[str, Any]]


def inline_peer() -> Peer:
    return Peer("bench", bench_server(), answer_for)


def stdio_peer(protocol: ProtocolEra) -> Peer:
    config = ServerConfig(name="forms", command=sys.executable, args=(str(STDIO_SCRIPT),), protocol=protocol)
    return Peer("forms", config, lambda tag: {"guests": int(ConversationKey.from_id(tag).channel[1:]) + 2})


def peer_for(kind: str, protocol: ProtocolEra) -> Peer:
    return inline_peer() if kind == "inline" else stdio_peer(protocol)


def results(chat: FakeChatPort, peer: Peer) -> dict[str, dict[str, Any]]:
    """What the server reported receiving, by the tag of the call."""
    out: dict[str, dict[str, Any]] = {}
    for message in chat.messages:
        if message.text.startswith(f"{peer.name}.book:\n"):
            data = json.loads(message.text.split("\n", 1)[1])
            out[data["tag"]] = data
    return out


def failures(chat: FakeChatPort, peer: Peer) -> list[str]:
    return [m.text for m in chat.messages if m.text.startswith(f"{peer.name}.book") and "failed" in m.text]


async def ask_three(host: Host, chat: FakeChatPort, peer: Peer) -> dict[str, str]:
    """Three calls in three conversations, each waiting on one card; the card ids by tag."""
    for room in ROOMS:
        await host.handle_message(MessageIn(room, person(room), f"call {peer.name} book "
                                            f"{json.dumps({'tag': room.id()})}", explicit_command=True))
    await chat.wait_for(lambda: len(chat.cards) == 3 or None)
    return {tag_of(card): card.id for card in chat.cards.values()}


async def decide(host: Host, peer: Peer, tag: str, card_id: str) -> Verdict:
    room = ConversationKey.from_id(tag)
    result = await host.decide(DecisionIn(card_id, person(room), "accept", peer.answer(tag)))
    return result.verdict


async def decide_while_failing(host: Host, chat: FakeChatPort, peer: Peer, cards: dict[str, str]) -> None:
    """Every decision is refused as not recorded: the person is told, the card stays open, the server waits. The
    last is claimed as adapters that must answer at once do (`ack_within`, a Slack modal's submission): it counts in
    memory at once, and its person hears afterwards that it was not recorded."""
    *waited, (at_once_tag, at_once_card) = cards.items()
    at_once = await host.decide(DecisionIn(at_once_card, person(ConversationKey.from_id(at_once_tag)), "accept",
                                           peer.answer(at_once_tag)), ack_within=0)
    assert at_once is not None and at_once.verdict is Verdict.CLAIMED
    async with anyio.create_task_group() as tg:
        verdicts: dict[str, Verdict] = {}

        async def one(tag: str, card_id: str) -> None:
            verdicts[tag] = await decide(host, peer, tag, card_id)

        for tag, card_id in waited:
            tg.start_soon(one, tag, card_id)
    assert verdicts == {tag: Verdict.LATE for tag, _ in waited}
    told = await chat.wait_for(lambda: chat.notices if len(chat.notices) == 3 else None)
    assert sorted((actor.key, text) for actor, text in told) == \
        sorted((person(ConversationKey.from_id(tag)).key, STORE_FAILED) for tag in cards)
    assert chat.finished == {}
    assert {i.id for i in host.broker.open_interactions()} == set(cards.values())
    assert results(chat, peer) == {} and failures(chat, peer) == []


async def retry_counts(host: Host, chat: FakeChatPort, store: AsyncStore, peer: Peer,
                       cards: dict[str, str]) -> None:
    """The same clicks once the store works again: each counts once, is audited once and reaches the server."""
    for tag, card_id in cards.items():
        assert await decide(host, peer, tag, card_id) is Verdict.CLAIMED
    done = await chat.wait_for(lambda: found if len(found := results(chat, peer)) == 3 else None)
    for card_id in cards.values():
        await chat.wait_finished(card_id)
    assert {tag: (data["action"], data["content"]) for tag, data in done.items()} == \
        {tag: ("accept", peer.answer(tag)) for tag in cards}
    assert failures(chat, peer) == []
    assert {card_id: chat.finished[card_id].status for card_id in cards.values()} == \
        dict.fromkeys(cards.values(), Status.ACCEPTED)
    assert sorted(card_id for card_id, _ in chat.finish_calls) == sorted(cards.values())  # each finished once
    for tag, card_id in cards.items():
        rows = await store.audit_rows(card_id)
        who = person(ConversationKey.from_id(tag)).key
        assert [(row.outcome, row.actor) for row in rows] == [("accepted", who)], rows


# -- a full disk ----------------------------------------------------------------------------------------------------


class Tmpfs:
    """A small tmpfs of its own (root only), so filling it fills nothing else."""

    def __init__(self, where: Path, size: str) -> None:
        self.path = where
        self._filler = where / "filler"
        where.mkdir()
        proc = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            pytest.skip(f"a full disk needs a tmpfs of its own, and mounting one failed (run as root): "
                        f"{proc.stderr.strip()}")

    def fill(self) -> None:
        """Take every free page: the next write that needs one fails with ENOSPC."""
        with open(self._filler, "ab", buffering=0) as out:
            for chunk in (1 << 20, 1 << 12):
                block = b"\0" * chunk
                while True:
                    try:
                        out.write(block)
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
        assert os.statvfs(self.path).f_bavail == 0

    def free(self) -> None:
        self._filler.unlink()

    def unmount(self) -> None:
        subprocess.run(["umount", "-l", str(self.path)], check=False)


@pytest.fixture
def tmpfs(tmp_path: Path) -> Iterator[Tmpfs]:
    disk = Tmpfs(tmp_path / "disk", "16m")
    try:
        yield disk
    finally:
        disk.unmount()


@pytest.mark.parametrize("protocol", ERAS)
@pytest.mark.parametrize("kind", ["inline", "stdio"])
async def test_a_decision_on_a_full_disk_is_kept_open_and_counts_when_retried(
        tmpfs: Tmpfs, protocol: ProtocolEra, kind: str, store_engine: str) -> None:
    peer = peer_for(kind, protocol)
    store = await open_store(tmpfs.path / "bridge.db")
    try:
        host, chat = await host_for(config_for({peer.name: peer.server}, server_protocol=protocol), store)
        async with host:
            with anyio.fail_after(patient(WAIT)):
                cards = await ask_three(host, chat, peer)
                tmpfs.fill()
                await decide_while_failing(host, chat, peer, cards)
                tmpfs.free()
                await retry_counts(host, chat, store, peer, cards)
    finally:
        await store.aclose()


# -- an unreachable Postgres ----------------------------------------------------------------------------------------


def database_of(url: str) -> str:
    return url.split("@/", 1)[1].split("?", 1)[0]


def cut_off(postgres: PostgresCluster, url: str) -> None:
    """The database refuses new connections and every open one is killed (the store's pool, its listener)."""
    name = database_of(url)
    postgres.psql(f"ALTER DATABASE {name} ALLOW_CONNECTIONS false")
    postgres.psql(f"SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = '{name}'")


def reconnect(postgres: PostgresCluster, url: str) -> None:
    postgres.psql(f"ALTER DATABASE {database_of(url)} ALLOW_CONNECTIONS true")


@pytest.mark.parametrize("protocol", ERAS)
async def test_a_decision_while_postgres_is_unreachable_is_kept_open_and_counts_when_retried(
        postgres: PostgresCluster, pg_url: str, protocol: ProtocolEra, store_engine: str) -> None:
    peer = inline_peer()
    store = await open_store(pg_url)
    try:
        host, chat = await host_for(config_for({peer.name: peer.server}, server_protocol=protocol), store)
        async with host:
            with anyio.fail_after(patient(WAIT)):
                cards = await ask_three(host, chat, peer)
                await anyio.to_thread.run_sync(cut_off, postgres, pg_url)
                await decide_while_failing(host, chat, peer, cards)
                await anyio.to_thread.run_sync(reconnect, postgres, pg_url)
                await retry_counts(host, chat, store, peer, cards)
    finally:
        await store.aclose()
