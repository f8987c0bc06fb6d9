"""The store, once, over either engine's driver (`bridge.storage.sqlite`, `bridge.storage.postgres`).

Every operation is one statement or one short transaction of steps, so nothing holds a transaction across an await.
Only `claim` asks for a durable commit.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
import zlib
from collections.abc import AsyncIterator, Callable, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any, TypeVar

import anyio

from bridge.door.model import CardRef, ConversationKey, Interaction, Outcome, Status
from bridge.errors import ConfigError, StoreError
from bridge.storage import audit as chain
from bridge.storage import codec
from bridge.storage.api import AuditRow, Lease, PendingCall, Reaped, StoredInteraction
from bridge.storage.audit_keys import AuditSettings
from bridge.storage.checkpoints import Checkpoints
from bridge.storage.codec import AUDIT_COLUMNS, INTERACTION_COLUMNS, PENDING_COLUMNS, PENDING_READ
from bridge.storage.driver import Done, Driver, Step
from bridge.storage.migrations import migrate
from bridge.storage.rows import UNREADABLE, Unreadable, read_each
from bridge.storage.running import RUNNING_COLUMNS, RunningRows, running_call
from bridge.storage.served_task_rows import ServedTaskRows
from bridge.storage.signin_rows import SigninRows
from bridge.storage.task_rows import TaskRows
from bridge.storage.team import TeamRows
from bridge.storage.token_rows import TokenRows

logger = logging.getLogger(__name__)

DECIDED_CHANNEL = "mcp_bridge_decided"
FORWARD_CHANNEL = "mcp_bridge_forward"
REAP_LOCK = 0x6D63_7062_7269_6402  # pg advisory lock key: "mcpbrid" + 2

AUDIT_LOCK = 0x6D63_7062_7269_6403  # pg advisory lock key of audit chain 0: "mcpbrid" + 3; chain n's is this + n
AUDIT_CHAINS = 16
"""Audit chains a shared store (Postgres) spreads rows over. Each chain's appends wait for one another (to their
synced commit), those of different chains do not: with one chain every decision of every worker waited for the one
before it to be synced. 16 is above the connections a worker's pool holds (10), so the decisions of one worker rarely
meet on a chain, and few enough that `audit --verify` stays short. SQLite has one writer: one chain."""
LEASE_MARGIN = 1.0
"""Seconds a worker's lease must still run for it to send a round its own claim took without asking the store again
(`send_round`): room for clocks a little apart between the machines of a fleet."""

T = TypeVar("T")

_INSERT_AUDIT = f"INSERT INTO audit ({AUDIT_COLUMNS}, hash, key_id, chain) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?)"
_SELECT_INTERACTIONS = f"SELECT {INTERACTION_COLUMNS} FROM interactions"
_DECIDE = ("UPDATE interactions SET status = ?, outcome = ?, decided_by = ?, shown = 0"
           " WHERE id = ? AND status = 'open'")
"""A claim: the card is to be shown final (`mark_shown`) by the worker that decided it, or whoever outlives it."""
_SAVE_PENDING = (f"INSERT INTO pending_calls ({PENDING_COLUMNS}, worker)"
                 f" VALUES ({','.join('?' * (len(PENDING_COLUMNS.split(', ')) + 1))}) ON CONFLICT (id)"
                 f" DO UPDATE SET {', '.join(f'{c} = excluded.{c}' for c in PENDING_COLUMNS.split(', ')[1:])},"
                 " worker = excluded.worker, sent_by = NULL, sent_at = NULL")
_INSERT_INTERACTION = ("INSERT INTO interactions (id, conversation, status, body, pending_call, input_key, created_at,"
                       " expires_at, worker, parked)")
_OPEN = Status.OPEN.value
_GIVE_BACK = ("UPDATE pending_calls SET sent_by = NULL, sent_at = NULL WHERE id = ? AND created_at = ?"
              " AND sent_by = ?")
"""A round this process took for sending (its claim did) and did not send, given back: as never sent."""


class SqlStore(TeamRows, TokenRows, RunningRows, TaskRows, SigninRows, ServedTaskRows):
    """`AsyncStore` on a driver. Build with `bridge.storage.open_store`."""

    def __init__(self, driver: Driver, worker_id: str, audit: AuditSettings | None = None) -> None:
        self._db = driver
        self.worker_id = worker_id
        self._audit = audit or AuditSettings()
        self._checkpoints = Checkpoints(driver, self._audit)
        self._chains = 1 if driver.exclusive else AUDIT_CHAINS
        self.process_id = f"{worker_id}/{uuid.uuid4().hex[:12]}"
        """This process among all that ever ran as `worker_id` (a restart under the same id is another one)."""
        self._taken: dict[str, float] = {}
        """Rounds this process's claims took for sending (`claim_parked`) and did not send yet (`send_round`), by call
        id: sending one needs no second commit, and a clean stop gives the rest back."""
        self._lease_until = 0.0
        """Until when this worker's lease runs, as its last heartbeat wrote it."""

    async def start(self, lease: float) -> None:
        """Bring the schema up to date and register this worker. Open work recorded under this worker's id is an
        earlier process's (a restart with the same `--worker-id`): nobody holds it in memory now, so it is disowned
        for `reap_workers` to hand over, and so are the cards it decided without showing them final. With an
        exclusive store (SQLite's lock) every other worker on record is gone too: their leases end now."""
        await migrate(self._db)
        await self._check_audit_key()
        me = (self.worker_id,)
        steps = [Step("UPDATE interactions SET worker = NULL WHERE worker = ? AND status = 'open'", me),
                 Step("UPDATE interactions SET decided_by = NULL WHERE decided_by = ? AND shown = 0", me),
                 Step("UPDATE pending_calls SET worker = NULL WHERE worker = ?", me),
                 Step("UPDATE running_calls SET worker = NULL WHERE worker = ?", me)]
        if self._db.exclusive:
            steps.append(Step("UPDATE workers SET lease_until = 0 WHERE id <> ?", me))
        await self._db.transaction(steps)
        await self.heartbeat(lease)

    @property
    def driver(self) -> Driver:
        """The engine underneath (tests and benches look at its plans and counters)."""
        return self._db

    @property
    def shared(self) -> bool:
        return not self._db.exclusive

    @property
    def file(self) -> str | None:
        path = getattr(self._db, "path", None)
        return str(path) if self._db.dialect == "sqlite" and path not in (None, ":memory:") else None

    @property
    def durable_commits(self) -> int:
        return self._db.durable_commits

    async def aclose(self) -> None:
        """Close the store; a clean stop gives back the rounds it took and did not send (`give_back_rounds`), and
        signs the audit chain's head (`bridge.storage.checkpoints`)."""
        try:
            with anyio.CancelScope(shield=True):
                await self.give_back_rounds()  # done already if a fleet stopped first (`Fleet.stopped`)
                await self._checkpoints.make()
        finally:
            await self._db.aclose()

    async def upkeep(self) -> None:
        await self._db.upkeep()

    async def flush(self) -> None:
        await self._db.flush()

    async def ping(self) -> None:
        await self._db.fetch("SELECT 1")

    async def _write(self, sql: str, params: Sequence[Any] = ()) -> int:
        return (await self._db.transaction([Step(sql, params)]))[0].count

    # -- audit -------------------------------------------------------------------------------------------------------

    async def audit(self, interaction: Interaction, outcome: Outcome, detail: str = "") -> None:
        number, steps = self._append_audit(codec.audit_values(interaction, outcome, detail, time.time()))
        await self._db.transaction(steps)
        await self._appended(number)

    async def record(self, row: AuditRow) -> None:
        number, steps = self._append_audit(codec.row_values(row))
        await self._db.transaction(steps)
        await self._appended(number)

    async def _check_audit_key(self) -> None:
        """Refuse to append unkeyed rows to a keyed chain: `audit --verify` would call every one of them forged."""
        last = await self._db.fetch("SELECT key_id FROM audit ORDER BY id DESC LIMIT 1")
        if last and last[0][0] and not self._audit.ring:
            raise ConfigError([f"{chain.KEY_ENV}: the audit log is keyed (key {last[0][0]}), but the variable is not "
                               "set: set it to the key ring the log was written with"])
        if last and last[0][0] and last[0][0] not in self._audit.ring:
            logger.warning("audit: the newest audit row was hashed with key %s, which %s does not hold: keep retired "
                           "keys after the current one, or `audit --verify` cannot check the rows before",
                           last[0][0], chain.KEY_ENV)

    def _chain_of(self, interaction_id: str) -> int:
        return zlib.crc32(interaction_id.encode()) % self._chains

    def _append_audit(self, values: tuple[Any, ...], *, guarded: bool = False,
                      locked: bool = False) -> tuple[int, list[Step]]:
        """An audit row linked to the newest one of the chain its interaction picks (`bridge.storage.audit`): the
        chain, and the steps. Reading that hash and appending after it must not interleave with another append to the
        chain: SQLite has one writer; on Postgres the chain's lock, held to the commit, orders them across workers (and
        ids follow that order). `locked`: an earlier step of the transaction took it."""
        chain_no = self._chain_of(str(values[1]))  # values[1]: the interaction's id
        steps = [Step("SELECT pg_advisory_xact_lock(?)", (AUDIT_LOCK + chain_no,), guarded)] \
            if self._db.dialect == "postgres" and not locked else []

        current = self._audit.current

        def linked(before: list[Done]) -> tuple[Any, ...]:
            last = before[-1].rows
            previous = last[0][0] if last else None
            if current is None:
                return (*values, chain.link(previous, values, None, chain_no), None, chain_no)
            return (*values, chain.link(previous, values, current[1], chain_no), current[0], chain_no)

        return chain_no, [*steps, Step("SELECT hash FROM audit WHERE chain = ? ORDER BY id DESC LIMIT 1", (chain_no,),
                                       guarded), Step(_INSERT_AUDIT, linked, guarded)]

    async def _appended(self, number: int, ran: bool = True) -> None:
        """After the commit of a transaction that appended to chain `number` (`ran`: a guarded append did run): counted
        only now, so a checkpoint made meanwhile by another task, which cannot see the row yet, is not taken for one
        that covers it."""
        if ran:
            self._checkpoints.appended(number)
        await self._checkpoints.due()

    async def audit_rows(self, interaction_id: str | None = None) -> list[AuditRow]:
        if interaction_id is None:
            rows = await self._db.fetch(f"SELECT {AUDIT_COLUMNS}, id, hash, key_id, chain FROM audit ORDER BY id")
        else:
            rows = await self._db.fetch(f"SELECT {AUDIT_COLUMNS}, id, hash, key_id, chain FROM audit"
                                        " WHERE interaction_id = ? ORDER BY id", (interaction_id,))
        return [codec.audit_row(r) for r in rows]

    # -- interactions ------------------------------------------------------------------------------------------------

    async def save_interaction(self, interaction: Interaction, *, pending_call: str | None = None,
                               input_key: str | None = None, parked: bool = False) -> None:
        values = (interaction.id, interaction.conversation.id(), _OPEN,
                  codec.dump_interaction(interaction), pending_call, input_key, time.time(), interaction.expires_at,
                  self.worker_id, int(parked))
        if pending_call is None:
            await self._write(f"{_INSERT_INTERACTION} VALUES (?,?,?,?,?,?,?,?,?,?)", values)
            return
        # The call's round is written behind (`save_pending_call`): this commit carries it. Should that write have
        # failed, the card is not posted either (no card may outlive a call nobody can continue). One statement: a
        # transaction of two costs a `:memory:` round three statements more.
        if not await self._write(f"{_INSERT_INTERACTION} SELECT ?,?,?,?,?,?,?,?,?,? WHERE EXISTS"
                                 " (SELECT 1 FROM pending_calls WHERE id = ?)", (*values, pending_call)):
            raise StoreError(f"the call {pending_call} is not on record, so its request cannot be asked")

    async def set_card(self, interaction_id: str, card: CardRef) -> None:
        # The card is already posted and answerable from its interaction; the reference is for editing it after a
        # restart and for finding it from another worker. One process (SQLite) writes it behind: its own reads wait
        # for it. Workers sharing a store commit it now: the next click on the card may reach another worker, which
        # finishes the card it claimed only if it finds the reference (written behind, it was often not there yet).
        step = Step("UPDATE interactions SET card = ? WHERE id = ?", (codec.dump(dict(card.data)), interaction_id))
        if self._db.exclusive:
            await self._db.write_behind([step])
        else:
            await self._db.transaction([step])

    def _claiming(self, interaction: Interaction, outcome: Outcome, detail: str) -> tuple[int, Step, list[Step]]:
        """A claim's update, and its audit row's steps (guarded: only for the claim that won). On Postgres the winner
        takes its chain's lock in the update itself (`RETURNING` runs only for the row updated): a round trip less."""
        number, append = self._append_audit(codec.audit_values(interaction, outcome, detail, time.time()),
                                            guarded=True, locked=self._db.dialect == "postgres")
        params = (outcome.status.value, codec.dump_outcome(outcome), self.worker_id, interaction.id)
        if self._db.dialect == "postgres":
            return number, Step(f"{_DECIDE} RETURNING pg_advisory_xact_lock(?)", (*params, AUDIT_LOCK + number)), append
        return number, Step(_DECIDE, params), append

    async def claim(self, interaction: Interaction, outcome: Outcome, detail: str = "") -> bool:
        number, decide, append = self._claiming(interaction, outcome, detail)
        steps = [decide, *append]
        if self._db.dialect == "postgres":
            # Delivered at commit, to every worker listening (the owner of a legacy call answers its server).
            steps.append(Step("SELECT pg_notify(?, ?)", (DECIDED_CHANNEL, interaction.id), guarded=True))
        done = await self._db.transaction(steps, durable=True)
        await self._appended(number, done[0].count == 1)
        return done[0].count == 1

    async def claim_parked(self, interaction: Interaction, outcome: Outcome, detail: str,
                           pending_call: str) -> tuple[bool, bool]:
        # The call's row is locked after the claim (on Postgres a second claim on the same call waits for this one's
        # commit, and its check below then sees this answer): of two claims racing on a round's last two cards,
        # exactly one finds no open card left. (The audit chain's lock comes first, with the claim; whoever holds a
        # call's row has passed its own chain's lock and waits for nothing more, so the two never deadlock.)
        rest_open = ("EXISTS (SELECT 1 FROM interactions i WHERE i.pending_call = pending_calls.id AND"
                     " i.status = 'open' AND i.input_key IS NOT NULL AND i.created_at >= pending_calls.created_at)")
        number, decide, append = self._claiming(interaction, outcome, detail)
        steps = [
            decide,
            Step("UPDATE pending_calls SET worker = worker WHERE id = ?", (pending_call,), guarded=True),
            *append,
            # Only a card of the stored round answers it (one of an earlier round is merely retired). The claim that
            # answers it also takes the round's sending for this process (as `send_round` would, in this same synced
            # commit: a decision costs one sync, as a legacy one does). From here the store says the server may have
            # had the round: a crash before the answers go out leaves it taken by a dead process, which a take-over
            # treats as sent (tells, or re-sends for `on_interrupt: resend`), never as a round to send on its own.
            # (No round is sent with a card of it open, so whoever took it before, if anyone, has not sent it: a
            # process that asked a card again after taking the round.)
            Step(f"UPDATE pending_calls SET worker = ?, sent_by = ?, sent_at = ? WHERE id = ? AND NOT {rest_open} AND"
                 " (SELECT created_at FROM interactions WHERE id = ?) >= pending_calls.created_at"
                 " RETURNING created_at",
                 (self.worker_id, self.process_id, time.time(), pending_call, interaction.id), guarded=True),
        ]
        if self._db.dialect == "postgres":
            steps.append(Step("SELECT pg_notify(?, ?)", (DECIDED_CHANNEL, interaction.id), guarded=True))
        done = await self._db.transaction(steps, durable=True)
        await self._appended(number, done[0].count == 1)
        last = done[-2 if self._db.dialect == "postgres" else -1].rows
        if last:
            self._taken[pending_call] = float(last[0][0])
        return done[0].count == 1, bool(last)

    async def mark_shown(self, interaction_id: str) -> None:
        # Written behind: lost on a crash, the card is only shown final once more.
        await self._db.write_behind([Step("UPDATE interactions SET shown = 1 WHERE id = ? AND shown = 0",
                                          (interaction_id,))])

    async def forget_cards(self, platform: str) -> int:
        where = (_like_prefix(platform + "/"),)
        # Decided ones count as shown: the card they would be shown final on ended with the process.
        done = await self._db.transaction([
            Step("UPDATE interactions SET card = NULL WHERE status = 'open' AND card IS NOT NULL"
                 " AND conversation LIKE ? ESCAPE '\\'", where),
            Step("UPDATE interactions SET shown = 1 WHERE shown = 0 AND status <> 'open'"
                 " AND conversation LIKE ? ESCAPE '\\'", where)])
        return done[0].count

    async def interaction(self, interaction_id: str) -> StoredInteraction | None:
        """The interaction, or None if unknown or unreadable (a restart closes unreadable ones)."""
        rows = await self._db.fetch(f"{_SELECT_INTERACTIONS} WHERE id = ?", (interaction_id,))
        found = _readable(rows, codec.stored_interaction)
        return found[0] if found else None

    async def open_interactions(self) -> list[StoredInteraction]:
        rows = await self._db.fetch(f"{_SELECT_INTERACTIONS} WHERE status = 'open' ORDER BY created_at")
        return _readable(rows, codec.stored_interaction)

    async def interactions_for_call(self, pending_call: str, since: float = 0.0) -> list[StoredInteraction]:
        rows = await self._db.fetch(f"{_SELECT_INTERACTIONS} WHERE pending_call = ? AND created_at >= ?"
                                    " ORDER BY created_at", (pending_call, since))
        return _readable(rows, codec.stored_interaction)

    async def close_unreadable(self, row: Unreadable, reason: str) -> None:
        """End a row that cannot be read back: an interaction as failed (with an audit row, unless it was no longer
        open), a pending call deleted."""
        if row.table == "pending_calls":
            await self.delete_pending_call(row.id)
            return
        outcome = Outcome(Status.FAILED, reason=reason)
        values = (time.time(), row.id, UNREADABLE, UNREADABLE, row.conversation, outcome.status.value, None, None,
                  None, reason)

        # Like a claim: the audit row only if this closed it, in one transaction.
        number, append = self._append_audit(values, guarded=True)
        done = await self._db.transaction([
            Step("UPDATE interactions SET status = ?, outcome = ? WHERE id = ? AND status = 'open'",
                 (outcome.status.value, codec.dump_outcome(outcome), row.id)),
            *append])
        await self._appended(number, done[0].count > 0)

    async def decided(self, interaction_ids: Collection[str]) -> set[str]:
        if not interaction_ids:
            return set()
        param: object
        if self._db.dialect == "postgres":
            sql, param = "id = ANY(?)", list(interaction_ids)
        else:
            sql, param = "id IN (SELECT value FROM json_each(?))", json.dumps(list(interaction_ids))
        rows = await self._db.fetch(f"SELECT id FROM interactions WHERE {sql} AND status <> 'open'", (param,))
        return {r[0] for r in rows}

    def decisions(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        return self._db.listen(DECIDED_CHANNEL)

    async def forward(self, interaction_id: str, message: str) -> int | None:
        if self._db.dialect != "postgres":
            return None
        # Stored and announced in one transaction: the notification is delivered on commit, with the row visible.
        done = await self._db.transaction([
            Step("INSERT INTO forwards (interaction_id, message, at) VALUES (?, ?, ?) RETURNING id",
                 (interaction_id, message, time.time())),
            Step("SELECT pg_notify(?, ?)", (FORWARD_CHANNEL, interaction_id))])
        return int(done[0].rows[0][0])

    async def take_forwarded(self, interaction_ids: Collection[str]) -> list[str]:
        if self._db.dialect != "postgres" or not interaction_ids:
            return []
        # Deleted as taken: whoever takes a row (notification or poll) is the only one to see it.
        taking = Step("DELETE FROM forwards WHERE interaction_id = ANY(?) RETURNING id, message",
                      (list(interaction_ids),))
        done = await self._db.transaction([taking])
        return [r[1] for r in sorted(done[0].rows)]  # in the order they were forwarded

    async def withdraw_forward(self, forward_id: int) -> bool:
        return await self._write("DELETE FROM forwards WHERE id = ?", (forward_id,)) > 0

    def forwarded(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        return self._db.listen(FORWARD_CHANNEL)

    def _signal(self, payload: str) -> list[Step]:
        if self._db.dialect != "postgres":
            return []
        return [Step("SELECT pg_notify(?, ?)", (DECIDED_CHANNEL, payload), guarded=True)]

    # -- deadlines ---------------------------------------------------------------------------------------------------

    async def next_deadline(self) -> float | None:
        rows = await self._db.fetch("SELECT min(expires_at) FROM interactions WHERE status = 'open'")
        return float(rows[0][0]) if rows and rows[0][0] is not None else None

    async def take_expired(self, *, lease: float = 30.0, limit: int = 100,
                           now: float | None = None) -> list[StoredInteraction]:
        now = time.time() if now is None else now
        due = "status = 'open' AND expires_at <= ? AND (expiry_until IS NULL OR expiry_until < ?)"
        # Postgres: rows another worker is leasing right now are skipped, not waited for; the outer condition is
        # checked again on the row as it is when locked, so a lease is never taken twice.
        skip = " FOR UPDATE SKIP LOCKED" if self._db.dialect == "postgres" else ""
        sql = (f"UPDATE interactions SET expiry_worker = ?, expiry_until = ? WHERE {due} AND id IN"
               f" (SELECT id FROM interactions WHERE {due} ORDER BY expires_at LIMIT ?{skip})"
               f" RETURNING {INTERACTION_COLUMNS}")
        done = await self._db.transaction([Step(sql, (self.worker_id, now + lease, now, now, now, now, limit))])
        return sorted(_readable(done[0].rows, codec.stored_interaction), key=lambda s: s.interaction.expires_at)

    # -- pending 2026 calls ------------------------------------------------------------------------------------------

    async def save_pending_call(self, call: PendingCall) -> None:
        # Written behind: committed with the round's first card (`save_interaction`), or soon if it has none. A new
        # round has not been sent yet.
        await self._db.write_behind([Step(_SAVE_PENDING, (*codec.pending_values(call, time.time()), self.worker_id))])

    async def send_round(self, call_id: str, round_at: float, *, taking_from: str | None = None) -> bool:
        if self._taken.get(call_id) == round_at:
            del self._taken[call_id]  # from here it is sent (not given back by a clean stop)
            if self._leased():
                # Taken by this process's claim of the round's last card, in that claim's synced commit: no second.
                return True
        # Otherwise (and for a round taken here while this worker's lease lapsed: a stall longer than the lease, in
        # which a survivor may have taken the round over and sent it) the store decides, as below; a round still
        # taken by this process is its to send.
        # One conditional update decides who continues a round, across workers and take-overs; synced like a
        # decision, since after a crash it is what says the server may have had the round.
        done = await self._db.transaction([Step(
            "UPDATE pending_calls SET sent_by = ?, sent_at = ?, worker = ? WHERE id = ? AND created_at = ?"
            " AND (sent_by IS NULL OR sent_by = ? OR sent_by = ?)",
            (self.process_id, time.time(), self.worker_id, call_id, round_at, self.process_id, taking_from))],
            durable=True)
        return done[0].count == 1

    async def release_round(self, call_id: str, round_at: float) -> None:
        if self._taken.get(call_id) != round_at:
            return  # not taken by a claim here, or sent already
        del self._taken[call_id]
        # Not synced: lost on a power cut, the round stays taken by a process that is gone, which is told as
        # interrupted, never sent twice.
        await self._write(_GIVE_BACK, (call_id, round_at, self.process_id))

    async def give_back_rounds(self) -> None:
        taken, self._taken = self._taken, {}
        if not taken:
            return
        try:
            await self._db.transaction([
                Step(_GIVE_BACK, (call_id, round_at, self.process_id)) for call_id, round_at in taken.items()])
        except StoreError as exc:
            # Kept as taken: told as interrupted after the restart, never sent twice.
            logger.warning("could not give back %d rounds taken and not sent: %s", len(taken), exc)

    async def pending_call(self, call_id: str) -> PendingCall | None:
        rows = await self._db.fetch(f"SELECT {PENDING_READ} FROM pending_calls WHERE id = ?", (call_id,))
        found = _readable(rows, codec.pending_call)
        return found[0] if found else None

    async def delete_pending_call(self, call_id: str) -> None:
        self._taken.pop(call_id, None)
        await self._write("DELETE FROM pending_calls WHERE id = ?", (call_id,))

    async def pending_calls(self) -> list[PendingCall]:
        rows = await self._db.fetch(f"SELECT {PENDING_READ} FROM pending_calls ORDER BY created_at")
        return _readable(rows, codec.pending_call)

    # -- workers -----------------------------------------------------------------------------------------------------

    def _leased(self) -> bool:
        """Whether no other worker can have taken this one's work over: the only process (an exclusive store), or
        its lease holds for a while yet (a margin for clocks a little apart between machines)."""
        return self._db.exclusive or time.time() + LEASE_MARGIN < self._lease_until

    async def heartbeat(self, lease: float, *, now: float | None = None) -> None:
        now = time.time() if now is None else now
        self._lease_until = now + lease
        await self._write("INSERT INTO workers (id, started_at, heartbeat_at, lease_until) VALUES (?,?,?,?)"
                          " ON CONFLICT (id) DO UPDATE SET heartbeat_at = excluded.heartbeat_at,"
                          " lease_until = excluded.lease_until", (self.worker_id, now, now, now + lease))

    async def reap_workers(self, *, now: float | None = None) -> Reaped:
        now = time.time() if now is None else now
        # Owned by nobody alive: a lapsed worker, one never registered, or a row from before workers existed.
        orphan = "(worker IS NULL OR (worker <> ? AND worker NOT IN (SELECT id FROM workers WHERE lease_until >= ?)))"
        me = self.worker_id
        steps = [Step("SELECT pg_advisory_xact_lock(?)", (REAP_LOCK,))] if self._db.dialect == "postgres" else []
        steps += [
            Step(f"UPDATE interactions SET worker = ? WHERE status = 'open' AND {orphan}"
                 f" RETURNING {INTERACTION_COLUMNS}, conversation, created_at", (me, me, now)),
            Step(f"UPDATE pending_calls SET worker = ? WHERE {orphan} RETURNING {PENDING_READ}", (me, me, now)),
            Step(f"UPDATE running_calls SET worker = ? WHERE {orphan} RETURNING {RUNNING_COLUMNS}", (me, me, now)),
            # Cards decided and not shown final since, by a worker now gone (whoever posted them).
            Step(f"UPDATE interactions SET decided_by = ? WHERE shown = 0 AND status <> 'open' AND card IS NOT NULL"
                 " AND (decided_by IS NULL OR (decided_by <> ? AND decided_by NOT IN"
                 f" (SELECT id FROM workers WHERE lease_until >= ?))) RETURNING {INTERACTION_COLUMNS}", (me, me, now)),
            Step("DELETE FROM workers WHERE lease_until < ? AND id <> ? RETURNING id", (now, me)),
        ]
        interactions, calls, running, decided, workers = (await self._db.transaction(steps))[-5:]
        # Each row read on its own: one that cannot be read back is handed over apart, to be closed and told.
        opened, bad = read_each(sorted(interactions.rows, key=lambda r: r[-1]),
                                lambda r: codec.stored_interaction(r[:-2]),
                                lambda r: Unreadable("interactions", r[6], r[-2], r[3]))
        pending, bad_calls = read_each(calls.rows, codec.pending_call,
                                       lambda r: Unreadable("pending_calls", r[0], r[1], r[0], f"{r[2]}.{r[3]}"))
        return Reaped(
            workers=tuple(sorted(r[0] for r in workers.rows)),
            interactions=tuple(opened),
            pending_calls=tuple(sorted(pending, key=lambda c: c.created_at)),
            decided=tuple(_readable(decided.rows, codec.stored_interaction)),
            running=tuple(sorted((running_call(r) for r in running.rows), key=lambda c: c.started_at)),
            unreadable=(*bad, *bad_calls))

    def leadership(self, name: str, *, retry: float = 5.0) -> AbstractAsyncContextManager[Lease]:
        return self._db.leadership(name, retry)

    # -- retention ---------------------------------------------------------------------------------------------------

    async def prune(self, keep: float, *, now: float | None = None) -> int:
        cutoff = (time.time() if now is None else now) - keep
        if self._db.dialect == "postgres":
            await self._write("DELETE FROM forwards WHERE at < ?", (cutoff,))  # for cards whose holder died
        return await self._write(
            "DELETE FROM interactions WHERE status <> 'open' AND created_at < ?"
            " AND (pending_call IS NULL OR pending_call NOT IN (SELECT id FROM pending_calls))"
            # A stored call's approval stays while the call does: its receipt is made again from it after a restart.
            " AND id NOT IN (SELECT approval FROM pending_calls WHERE approval IS NOT NULL)", (cutoff,))

    # -- per-conversation data ---------------------------------------------------------------------------------------

    async def roots(self, conversation: ConversationKey) -> list[tuple[str, str]]:
        order = "rowid" if self._db.dialect == "sqlite" else "pos"
        rows = await self._db.fetch(f"SELECT uri, name FROM roots WHERE conversation = ? ORDER BY {order}",
                                    (conversation.id(),))
        return [(r[0], r[1]) for r in rows]

    async def add_root(self, conversation: ConversationKey, uri: str, name: str) -> None:
        # Delete then insert: a root given again moves to the end, as it always did.
        await self._db.transaction([
            Step("DELETE FROM roots WHERE conversation = ? AND uri = ?", (conversation.id(), uri)),
            Step("INSERT INTO roots (conversation, uri, name) VALUES (?,?,?)", (conversation.id(), uri, name))])

    async def remove_root(self, conversation: ConversationKey, uri: str) -> bool:
        return await self._write("DELETE FROM roots WHERE conversation = ? AND uri = ?", (conversation.id(), uri)) > 0

    async def setting(self, conversation: ConversationKey, key: str) -> str | None:
        rows = await self._db.fetch("SELECT value FROM settings WHERE conversation = ? AND key = ?",
                                    (conversation.id(), key))
        return str(rows[0][0]) if rows else None

    async def set_setting(self, conversation: ConversationKey, key: str, value: str) -> None:
        await self._write("INSERT INTO settings (conversation, key, value) VALUES (?,?,?)"
                          " ON CONFLICT (conversation, key) DO UPDATE SET value = excluded.value",
                          (conversation.id(), key, value))

    async def adapter_value(self, namespace: str, key: str) -> str | None:
        rows = await self._db.fetch("SELECT value FROM adapter_state WHERE namespace = ? AND key = ?",
                                    (namespace, key))
        return str(rows[0][0]) if rows else None

    async def set_adapter_value(self, namespace: str, key: str, value: str) -> None:
        await self._write("INSERT INTO adapter_state (namespace, key, value) VALUES (?,?,?)"
                          " ON CONFLICT (namespace, key) DO UPDATE SET value = excluded.value", (namespace, key, value))

    async def history(self, conversation: ConversationKey) -> list[dict[str, Any]]:
        rows = await self._db.fetch("SELECT message FROM history WHERE conversation = ? ORDER BY id",
                                    (conversation.id(),))
        return [json.loads(r[0]) for r in rows]

    async def append_history(self, conversation: ConversationKey, messages: Sequence[Mapping[str, Any]]) -> None:
        if messages:
            await self._db.transaction([Step("INSERT INTO history (conversation, message) VALUES (?, ?)",
                                             (conversation.id(), json.dumps(dict(m)))) for m in messages])

    async def clear_history(self, conversation: ConversationKey) -> None:
        await self._write("DELETE FROM history WHERE conversation = ?", (conversation.id(),))


def _readable(rows: list[Any], read: Callable[[Any], T]) -> list[T]:
    return read_each(rows, read, lambda r: None)[0]


def _like_prefix(text: str) -> str:
    """A LIKE pattern matching everything that starts with `text` (its own %, _ and \\ taken literally)."""
    return text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
