"""The store's one interface, async, for both engines (SQLite embedded, Postgres for several workers).

Rows are values (`bridge.storage.rows`: `AuditRow`, `PendingCall`, `StoredInteraction`). What is new
serves restarts and several workers:

- `claim` is the only way an interaction ends: one atomic `UPDATE … WHERE status = 'open'` and its audit row in one
  transaction, reporting whether this caller won. It is the one commit per decision that is synced to disk; every
  other write may be lost on a power cut and is synced by the next claim (SQLite WAL and Postgres WAL are both
  replayed as a prefix).
- A stored 2026 round's answers go to the server once: the process that sends them is recorded first, synced, and
  after a crash that record says the server may have had them ("sent": taken for sending). The claim that answers a
  round's last open card records it in its own commit (`claim_parked`), so a parked decision costs one sync too;
  `send_round` is the synced commit of the other ways to a round (a take-over, a round answered without a card), one
  conditional update that decides who continues it (a click's claim and a take-over may both reach for it).
- Deadlines are stored with the interaction; `take_expired` leases due cards to one worker, and the claim of the
  expiry settles ties, so a card is never expired twice.
- Workers register and heartbeat a lease; `reap_workers` hands the open work of workers whose lease lapsed (or who
  never registered: rows from before workers existed) to the caller, exactly once, with the cards they decided and
  had not shown final yet.
- `decisions()` streams ids of interactions decided by any worker (Postgres LISTEN/NOTIFY; SQLite has only one
  process, so nothing ever arrives); `decided()` is the polling fallback.
- `prune` drops finished interaction rows past a retention (the audit log keeps the record).

`AsyncStore` is the union of small roles (`CardStore`, `AuditLog`, `PendingCallStore`, `LeaseStore`, …), one per
kind of use: a module asks for the roles it uses, so its signature says what of the store it touches.

Timestamps are seconds since the epoch from the caller's clock (`time.time()` unless `now` is given, which tests use
instead of sleeping).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Collection, Mapping, Sequence
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass
from typing import Any, Protocol

import anyio

from bridge.door.model import CardRef, ConversationKey, Interaction, Outcome
from bridge.storage.rows import (
    AuditRow,
    PendingCall,
    RunningCall,
    SigninRow,
    StoredInteraction,
    StoredTask,
    Unreadable,
)
from bridge.storage.served_tasks import ServedTaskStore

__all__ = ["AdapterValues", "AsyncStore", "AuditLog", "AuditRow", "CardStore", "ConversationData", "DecisionFeed",
           "GrantStore", "HistoryStore", "Housekeeping", "Lease", "LeaseStore", "PendingCall", "PendingCallStore",
           "Reaped", "RunningCallStore", "ServedTaskStore", "SigninRow", "SigninRows", "StoreLife",
           "StoredInteraction", "TaskStore", "TokenStore", "Unreadable", "UsageStore"]


@dataclass(frozen=True, slots=True)
class Reaped:
    """The open work of lapsed workers, now owned by the worker that reaped it."""

    workers: tuple[str, ...]
    interactions: tuple[StoredInteraction, ...]
    """Open interactions they owned: legacy ones (no pending call) can only be failed; 2026 ones continue."""
    pending_calls: tuple[PendingCall, ...]
    running: tuple[RunningCall, ...] = ()
    """Calls they had running (any era): cut short; their conversations are told, unless a 2026 call continues."""
    decided: tuple[StoredInteraction, ...] = ()
    """Posted cards they decided (whoever posted them) and did not show final since (`mark_shown`): they died
    between the claim and the chat edit, so the reaper shows them final."""
    unreadable: tuple[Unreadable, ...] = ()
    """Their open interactions and pending calls that cannot be read back: closed (`close_unreadable`), audited and
    told."""


@dataclass(slots=True)
class Lease:
    """Leadership of one named role (a Matrix sync loop, say). `lost` is set if the store stops vouching for it."""

    name: str
    lost: anyio.Event


class SigninRows(Protocol):
    """Per-person sign-ins in flight (`bridge.storage.signin_rows`): their redirect may reach any worker."""

    worker_id: str

    async def save_signin(self, state_hash: str, server: str, person: str, expires_at: float) -> None: ...
    async def signin(self, state_hash: str, *, now: float | None = None) -> SigninRow | None: ...
    async def return_signin(self, state_hash: str, code: str | None, iss: str | None, error: str | None, *,
                            now: float | None = None) -> bool: ...
    async def use_signin(self, state_hash: str, *, now: float | None = None) -> bool: ...
    async def take_signin(self, state_hash: str) -> SigninRow | None: ...
    async def end_signin(self, state_hash: str, error: str | None) -> bool: ...


class StoreLife(Protocol):
    """The store as a whole: which worker holds it, whether others share it, its upkeep and end."""

    worker_id: str
    process_id: str
    """This process among all that ran as `worker_id` (what `send_round` and a round's last claim record)."""

    @property
    def shared(self) -> bool:
        """Whether other workers may use this store at the same time (Postgres), rather than this process alone."""
        ...

    @property
    def file(self) -> str | None:
        """The SQLite file the store is (None for Postgres and `:memory:`)."""
        ...

    @property
    def durable_commits(self) -> int:
        """Commits made durable (synced) since opening: one per claim, none for anything else."""
        ...

    async def aclose(self) -> None: ...

    async def flush(self) -> None:
        """Commit the bookkeeping written behind so far (before showing what it records)."""
        ...

    async def upkeep(self) -> None:
        """The store's background work while the bridge runs (SQLite commits writes nobody waits on); until
        cancelled. Run by the fleet."""
        ...

    async def ping(self) -> None:
        """One round trip to the store (readiness); `StoreError` when it cannot be reached."""
        ...


class AuditLog(Protocol):
    """The audit log: what ended how, and what else is on record (approvals, grants used, receipts)."""

    async def audit(self, interaction: Interaction, outcome: Outcome, detail: str = "") -> None: ...
    async def record(self, row: AuditRow) -> None:
        """One audit row as given (its `id` and `hash` are ignored): also what is not an interaction's end (one
        approval of several, a grant used). Linked to the newest row in the hash chain (`bridge.storage.audit`)."""
        ...

    async def audit_rows(self, interaction_id: str | None = None) -> list[AuditRow]: ...


class CardStore(Protocol):
    """Interactions (cards) on record: saved open, claimed to their end, read back."""

    async def save_interaction(self, interaction: Interaction, *, pending_call: str | None = None,
                               input_key: str | None = None, parked: bool = False) -> None:
        """Store a new open interaction, owned by this worker, with its deadline. `parked`: no task will wait on it
        (its end is claimed with `claim_parked`). With `pending_call`, in the same commit as the call's round written
        behind before it; `StoreError` if that call is not on record (never stored, or ended)."""
        ...

    async def set_card(self, interaction_id: str, card: CardRef) -> None: ...

    async def claim(self, interaction: Interaction, outcome: Outcome, detail: str = "") -> bool:
        """End an open interaction with `outcome` and its audit row, atomically and durably. False (and nothing
        written) when it was no longer open: someone else's decision, expiry or cancellation came first."""
        ...

    async def claim_parked(self, interaction: Interaction, outcome: Outcome, detail: str,
                           pending_call: str) -> tuple[bool, bool]:
        """`claim` for a card of a stored 2026 call's round: (won, last). `last`: this claim won and answered the
        round's last open card while the call is still stored; the call then belongs to this worker, which continues
        it, and the round's sending is recorded as this process's (as `send_round` would: the process may send it
        without asking again). Exactly one claim of a round is last, across workers. One durable commit, as
        `claim`."""
        ...

    async def mark_shown(self, interaction_id: str) -> None:
        """The decided card's final state is shown in chat: nobody need show it again (`Reaped.decided`)."""
        ...

    async def forget_cards(self, platform: str) -> int:
        """Open interactions on `platform` lose their card, so that they are posted again when resumed, and decided
        ones count as shown final: for a platform whose cards do not outlive the process (a terminal). Returns how
        many open ones lost their card."""
        ...

    # Rows that cannot be read back are left out of what these return (`reap_workers` hands them over apart).
    async def interaction(self, interaction_id: str) -> StoredInteraction | None: ...
    async def open_interactions(self) -> list[StoredInteraction]: ...
    async def interactions_for_call(self, pending_call: str, since: float = 0.0) -> list[StoredInteraction]: ...

    async def close_unreadable(self, row: Unreadable, reason: str) -> None:
        """End a row that cannot be read back: an open interaction as failed with its audit row, a pending call
        deleted."""
        ...


class DecisionFeed(Protocol):
    """How workers hear of decisions: those claimed anywhere, and those forwarded to the worker holding a card."""

    async def decided(self, interaction_ids: Collection[str]) -> set[str]:
        """Which of these are no longer open (the polling fallback for `decisions()`)."""
        ...

    def decisions(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """Ids of interactions as any worker claims them, from the moment the context is entered."""
        ...

    async def forward(self, interaction_id: str, message: str) -> int | None:
        """Hand a short message (a decision on a card another worker holds, as JSON) to the worker holding
        `interaction_id`: stored until that worker `take_forwarded`s it (so a worker that was not listening when it
        was sent still gets it), and announced to every worker listening to `forwarded()`. Its id (for
        `withdraw_forward`); None on a store no other worker shares."""
        ...

    async def take_forwarded(self, interaction_ids: Collection[str]) -> list[str]:
        """The messages forwarded for these interactions and not yet taken, oldest first; each is taken once."""
        ...

    async def withdraw_forward(self, forward_id: int) -> bool:
        """Take back a forwarded message; False if the holding worker took it first."""
        ...

    def forwarded(self) -> AbstractAsyncContextManager[AsyncIterator[str]]:
        """Ids of interactions as any worker forwards a decision on them, from the moment the context is entered
        (a wake-up only: the messages are `take_forwarded`)."""
        ...


class Housekeeping(Protocol):
    """The fleet's periodic work on the store: deadlines due, retention."""

    async def next_deadline(self) -> float | None:
        """The earliest deadline of an open interaction."""
        ...

    async def take_expired(self, *, lease: float = 30.0, limit: int = 100,
                           now: float | None = None) -> list[StoredInteraction]:
        """Open interactions past their deadline, leased to this worker for `lease` seconds so no other worker takes
        them meanwhile. Expire each with `claim`."""
        ...

    async def prune(self, keep: float, *, now: float | None = None) -> int:
        """Delete finished interactions created more than `keep` seconds ago (those of a stored call that is still
        pending stay); the number deleted."""
        ...


class PendingCallStore(Protocol):
    """Stored 2026 calls waiting on answers, one round each."""

    async def save_pending_call(self, call: PendingCall) -> None:
        """Store a 2026 call's round (replacing the one before). Written behind: its first card's interaction
        (`save_interaction`) carries it, so a round that asks people costs no commit of its own; one answered without
        a card is committed soon all the same."""
        ...
    async def send_round(self, call_id: str, round_at: float, *, taking_from: str | None = None) -> bool:
        """Record, durably, that this process sends the round of `call_id` stored at `round_at` (its
        `PendingCall.created_at`) to the server now: True if it may, False if another process sent it (or the round
        is no longer the stored one, or the call ended). One atomic statement, so exactly one worker continues a
        round whoever else (a click's claim, a take-over) reaches for it. `taking_from`: the process that sent it
        before, which died (a take-over that re-sends, for servers that allow it). A round this process's own claim
        took (`claim_parked`) is its to send without a second commit; until it is sent, a clean stop
        (`LeaseStore.give_back_rounds`) gives it back, so the next process sends it as a round never sent (a crash
        leaves it taken: told as interrupted)."""
        ...
    async def release_round(self, call_id: str, round_at: float) -> None:
        """Give back a round this process's claim took (`claim_parked`) and that it will not send now (it asks a card
        of it again): the claim of that card takes it then. Nothing for a round taken otherwise. Not synced."""
        ...
    async def pending_call(self, call_id: str) -> PendingCall | None: ...
    async def delete_pending_call(self, call_id: str) -> None: ...
    async def pending_calls(self) -> list[PendingCall]: ...


class LeaseStore(Protocol):
    """Workers' leases: alive on record, the open work of lapsed ones taken over, one leader per role."""

    async def heartbeat(self, lease: float, *, now: float | None = None) -> None:
        """Keep this worker alive for `lease` more seconds."""
        ...

    async def reap_workers(self, *, now: float | None = None) -> Reaped:
        """Take over the open work of every worker whose lease lapsed (exactly one caller gets each)."""
        ...

    async def give_back_rounds(self) -> None:
        """A stopping process gives back the 2026 rounds its claims took (`CardStore.claim_parked`) and it did not
        send: whoever takes their calls over sends them as rounds never sent. Before the lease ends, so a survivor
        reaping at once finds them given back. Not synced (lost on a power cut, they stay taken: told as
        interrupted, never sent twice)."""
        ...

    def leadership(self, name: str, *, retry: float = 5.0) -> AbstractAsyncContextManager[Lease]:
        """Wait until this worker leads `name` (one leader across the fleet), hold it for the block."""
        ...


class ConversationData(Protocol):
    """What a conversation keeps: its roots and settings."""

    async def roots(self, conversation: ConversationKey) -> list[tuple[str, str]]: ...
    async def add_root(self, conversation: ConversationKey, uri: str, name: str) -> None: ...
    async def remove_root(self, conversation: ConversationKey, uri: str) -> bool: ...
    async def setting(self, conversation: ConversationKey, key: str) -> str | None: ...
    async def set_setting(self, conversation: ConversationKey, key: str, value: str) -> None: ...


class HistoryStore(Protocol):
    """The agent's message history per conversation."""

    async def history(self, conversation: ConversationKey) -> list[dict[str, Any]]: ...
    async def append_history(self, conversation: ConversationKey, messages: Sequence[Mapping[str, Any]]) -> None: ...
    async def clear_history(self, conversation: ConversationKey) -> None: ...


class AdapterValues(Protocol):
    """Small values an adapter keeps across restarts (a sync token, say)."""

    async def adapter_value(self, namespace: str, key: str) -> str | None: ...
    async def set_adapter_value(self, namespace: str, key: str, value: str) -> None: ...


class GrantStore(Protocol):
    """Standing approvals (grants) per place."""

    async def save_grant(self, grant_id: str, place: str, expires_at: float | None, body: str) -> None: ...
    async def grants(self, places: Sequence[str], now: float) -> list[str]: ...
    async def all_grants(self, now: float) -> list[str]: ...
    async def revoke_grant(self, grant_id: str, by: str) -> bool: ...


class UsageStore(Protocol):
    """Model tokens used per day and subject (the budgets)."""

    async def add_usage(self, day: str, subjects: Sequence[str], tokens: int) -> None: ...
    async def usage(self, day: str, subject: str) -> int: ...
    async def usage_on(self, day: str) -> list[tuple[str, int]]: ...


class TokenStore(Protocol):
    """OAuth tokens, sealed before they get here."""

    async def sealed_token(self, server: str, identity: str, kind: str) -> bytes | None: ...
    async def keep_sealed_token(self, server: str, identity: str, kind: str, blob: bytes) -> None: ...
    async def forget_tokens(self, server: str, identity: str) -> None: ...
    async def token_servers(self, identity: str, kind: str) -> list[str]: ...
    async def token_identities(self, server: str, kind: str) -> list[str]: ...


class TaskStore(Protocol):
    """Tool calls running as tasks (`bridge.storage.task_rows`)."""

    async def record_task(self, task: StoredTask) -> None: ...
    async def task_status(self, call_id: str, status: str, message: str) -> None: ...
    async def end_task(self, call_id: str) -> None: ...
    async def claim_tasks(self, now: float | None = None) -> list[StoredTask]:
        """The tasks no live worker holds (an earlier run's, a dead worker's), taken by this worker."""
        ...


class RunningCallStore(Protocol):
    """Calls running (any era), so a dead worker's conversations are told."""

    async def record_running_call(self, call_id: str, conversation: ConversationKey, server: str,
                                  tool: str) -> None: ...
    async def end_running_call(self, call_id: str) -> None: ...
    async def running_calls(self) -> list[RunningCall]:
        """This worker's calls on record (the start's own, before `reap_workers` disowns nothing of this run)."""
        ...


class AsyncStore(StoreLife, AuditLog, CardStore, DecisionFeed, Housekeeping, PendingCallStore, LeaseStore,
                 ConversationData, HistoryStore, AdapterValues, GrantStore, UsageStore, TokenStore, TaskStore,
                 RunningCallStore, SigninRows, ServedTaskStore, Protocol):
    """Persistence for the bridge: every role above, in one object. Open with `bridge.storage.open_store`;
    `aclose()` when done. A module asks for the roles it uses (a `CardStore`, say), not for all of it."""
