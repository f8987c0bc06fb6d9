"""The one typed door to matrix-nio: every nio call of the adapter, and the one place its failures become ours.

nio ships no type information, returns loosely typed responses and reports failures both as values (`ErrorResponse`
subclasses such as `RoomSendError`) and as exceptions (transport errors after its retries, encryption trouble). This
module is the only one that touches a nio object: the rest of the adapter sees typed values (`RoomEvent`, event ids,
`Credentials`) and only ever `PlatformAPIError`, `RateLimited` and `UnknownToken`.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

import aiohttp
import anyio
import nio
from nio import exceptions as nio_exceptions
from nio.api import RelationshipType

from adapters.matrix.settings import MatrixSettings
from bridge.errors import AdapterError, PlatformAPIError, RateLimited
from bridge.observe import hooks as observe

logger = logging.getLogger(__name__)

PLATFORM = "matrix"

_NIO_FAILURES: tuple[type[BaseException], ...] = (
    nio_exceptions.ProtocolError,
    nio_exceptions.OlmTrustError,
    nio_exceptions.EncryptionError,
    nio_exceptions.GroupEncryptionError,
    aiohttp.ClientError,
    asyncio.TimeoutError,
)
_RELATIONS_FAILURES: tuple[type[BaseException], ...] = (AttributeError, AdapterError, *_NIO_FAILURES)
"""nio's relations iterator raises its transport errors (and AttributeError on an error page) mid-iteration."""

_STATE_ONLY = {"room": {"timeline": {"limit": 0}}}


class UnknownToken(PlatformAPIError):
    """The homeserver no longer accepts the access token (logged out, revoked or expired)."""


class LoginLost(AdapterError):
    """The bot's login is gone and cannot be renewed without a person (no password configured): `serve` ends."""


@dataclass(frozen=True, slots=True)
class Credentials:
    user_id: str
    device_id: str
    access_token: str


EventKind = Literal["invite", "member", "encrypted", "event"]


@dataclass(frozen=True, slots=True)
class RoomEvent:
    """One timeline event as the adapter needs it. `source` is the event's raw JSON (decrypted, for E2EE)."""

    kind: EventKind
    """`invite` and `member`: membership changes; `encrypted`: could not be decrypted (yet); `event`: the rest."""
    room_id: str
    event_id: str
    sender: str
    source: Mapping[str, Any]
    timestamp: int
    """The server's time (`origin_server_ts`), 0 when missing."""
    state_key: str = ""
    membership: str = ""
    prev_membership: str = ""
    session_id: str = ""
    """For `encrypted`: the megolm session whose room key it waits for."""
    raw: object = None
    """The nio event, for the façade alone (decrypting, asking for its key)."""


@dataclass(frozen=True, slots=True)
class RoomKey:
    """A megolm room key that arrived (nio has imported it already)."""

    room_id: str
    session_id: str


def _check(response: Any, method: str) -> Any:
    """Return a successful response; raise for an `ErrorResponse`."""
    if isinstance(response, nio.ErrorResponse):
        code = str(response.status_code or "")
        if code in ("M_LIMIT_EXCEEDED", "429"):
            retry_after: Any = getattr(response, "retry_after_ms", None) or 0
            raise RateLimited(PLATFORM, float(retry_after) / 1000)
        if code == "M_UNKNOWN_TOKEN":
            raise UnknownToken(PLATFORM, method, f"{code} {response.message}".strip())
        raise PlatformAPIError(PLATFORM, method, f"{code} {response.message}".strip())
    return response


async def _call(method: str, awaitable: Awaitable[Any]) -> Any:
    """Await one nio API call and translate whatever failure it reports (to the core's observers too)."""
    with observe.chat_call(PLATFORM, method):
        try:
            response = await awaitable
        except _NIO_FAILURES as exc:
            raise PlatformAPIError(PLATFORM, method, f"{type(exc).__name__}: {exc}") from exc
        return _check(response, method)


async def _rate_limit_wait(response: Any) -> None:
    name = type(response).__name__.removesuffix("Error")  # RoomSendError -> room_send, like `_call`'s method names
    method = re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()
    observe.rate_limit_wait(PLATFORM, method, (getattr(response, "retry_after_ms", 0) or 5000) / 1000)


def _timestamp(source: Mapping[str, Any]) -> int:
    ts = source.get("origin_server_ts")
    return ts if isinstance(ts, int) else 0


def _room_event(room_id: str, event: Any) -> RoomEvent:
    raw_source = getattr(event, "source", None)
    source: Mapping[str, Any] = raw_source if isinstance(raw_source, Mapping) else {}
    kind: EventKind = "event"
    if isinstance(event, nio.InviteMemberEvent):
        kind = "invite"
    elif isinstance(event, nio.RoomMemberEvent):
        kind = "member"
    elif isinstance(event, nio.MegolmEvent):
        kind = "encrypted"
    return RoomEvent(kind, room_id, str(getattr(event, "event_id", "") or ""), str(getattr(event, "sender", "") or ""),
                     source, _timestamp(source), state_key=str(getattr(event, "state_key", "") or ""),
                     membership=str(getattr(event, "membership", "") or ""),
                     prev_membership=str(getattr(event, "prev_membership", "") or ""),
                     session_id=str(getattr(event, "session_id", "") or "") if kind == "encrypted" else "",
                     raw=event)


class MatrixClient:
    """A typed `nio.AsyncClient` for one bot account."""

    def __init__(self, settings: MatrixSettings, client_config: Any = None) -> None:
        settings.store_path.mkdir(parents=True, exist_ok=True)
        self._nio: Any = nio.AsyncClient(
            settings.homeserver, settings.user_id, device_id=settings.device_id or "",
            store_path=str(settings.store_path),
            config=client_config or nio.AsyncClientConfig(
                encryption_enabled=settings.encryption,
                store_sync_tokens=False,  # kept by login.save_sync_token, also without E2EE
                max_limit_exceeded=settings.max_rate_limited,  # nio sleeps retry_after_ms between tries
                max_timeouts=3,
            ))
        # nio runs response callbacks on a 429 only, just before it sleeps for the Retry-After: a wait to report.
        self._nio.add_response_callback(_rate_limit_wait, nio.ErrorResponse)
        self._synced = anyio.Event()
        """Set (and replaced) after each sync: what waits for a room to appear waits for this."""

    # -- who we are ----------------------------------------------------------------------------------------------

    @property
    def user_id(self) -> str:
        return str(self._nio.user_id)

    @property
    def access_token(self) -> str:
        return str(self._nio.access_token or "")

    @property
    def e2ee(self) -> bool:
        """Whether end-to-end encryption is running (a key store is loaded)."""
        return self._nio.olm is not None

    async def whoami(self, user_id: str, access_token: str) -> str:
        """The device id of an access token."""
        self._nio.access_token = access_token
        self._nio.user_id = user_id
        response = await _call("whoami", self._nio.whoami())
        return str(response.device_id)

    async def login(self, password: str, device_name: str) -> Credentials:
        """A password login (a new device); it loads that device's key store."""
        response = await _call("login", self._nio.login(password, device_name=device_name))
        return Credentials(str(response.user_id), str(response.device_id), str(response.access_token))

    def restore_login(self, credentials: Credentials) -> None:
        """Use a kept login; this also loads nio's key store for the device (E2EE)."""
        self._nio.restore_login(credentials.user_id, credentials.device_id, credentials.access_token)

    def forget_device(self) -> None:
        """Drop the login and the key store, so the next login starts a new device with keys of its own."""
        c = self._nio
        c.access_token, c.device_id, c.store, c.olm = "", "", None, None

    async def close(self) -> None:
        await self._nio.close()

    # -- rooms ---------------------------------------------------------------------------------------------------

    def joined(self, room_id: str) -> bool:
        return room_id in self._nio.rooms

    def room_encrypted(self, room_id: str) -> bool | None:
        """Whether a joined room is encrypted; None for a room nio does not know."""
        room = self._nio.rooms.get(room_id)
        return None if room is None else bool(room.encrypted)

    def member_count(self, room_id: str) -> int:
        room = self._nio.rooms.get(room_id)
        return int(room.member_count) if room is not None else 0

    def display_name(self, room_id: str, user_id: str) -> str | None:
        room = self._nio.rooms.get(room_id)
        name = room.user_name(user_id) if room is not None else None
        return str(name) if name else None

    def members(self, room_id: str) -> frozenset[str] | None:
        """The joined members of a room, or None for a room nio does not know."""
        room = self._nio.rooms.get(room_id)
        return None if room is None else frozenset(str(u) for u in room.users)

    async def create_direct(self, user_id: str, *, encrypted: bool) -> str:
        """A new direct-message room with one person (invited); returns once a sync has brought it (nio sends only
        into rooms it knows)."""
        state = [{"type": "m.room.encryption", "state_key": "", "content": {"algorithm": "m.megolm.v1.aes-sha2"}}] \
            if encrypted else []
        response = await _call("room_create", self._nio.room_create(
            is_direct=True, invite=[user_id], preset=nio.RoomPreset.trusted_private_chat, initial_state=state))
        room_id = str(response.room_id)
        while room_id not in self._nio.rooms:
            synced = self._synced
            await synced.wait()
        return room_id

    async def join(self, room_id: str) -> None:
        await _call("join", self._nio.join(room_id))

    async def leave(self, room_id: str) -> None:
        await _call("leave", self._nio.room_leave(room_id))

    async def send(self, room_id: str, event_type: str, content: Mapping[str, Any]) -> str:
        """Send one event; its event id."""
        # ignore_unverified_devices: nio has no cross-signing, so "verified" would mean hand-verifying every
        # device of every member; the room key is shared with the members' devices as Element does by default.
        response = await _call("room_send", self._nio.room_send(room_id, event_type, dict(content),
                                                                ignore_unverified_devices=True))
        return str(response.event_id)

    async def event(self, room_id: str, event_id: str) -> RoomEvent | None:
        """One event of a room, decrypted where we can (None when it cannot be); a failed fetch raises
        `PlatformAPIError`."""
        response = await _call("room_get_event", self._nio.room_get_event(room_id, event_id))
        event = response.event
        if isinstance(event, nio.MegolmEvent):
            if not self.e2ee:
                return None
            event.room_id = event.room_id or room_id
            try:
                event = self._nio.decrypt_event(event)
            except _NIO_FAILURES:
                return None
        return _room_event(room_id, event)

    async def references(self, room_id: str, event_id: str) -> AsyncIterator[RoomEvent]:
        """The events that reference one (a poll's votes), decrypted where we can; one that cannot be decrypted
        is skipped (logged), a failed fetch raises `PlatformAPIError` (after those already yielded)."""
        async for event in self._relations(room_id, event_id, RelationshipType.reference):
            yield event

    async def annotations(self, room_id: str, event_id: str) -> AsyncIterator[RoomEvent]:
        """The reactions to an event that are still there (a redacted reaction no longer relates to anything)."""
        async for event in self._relations(room_id, event_id, RelationshipType.annotation):
            yield event

    async def _relations(self, room_id: str, event_id: str, rel_type: RelationshipType) -> AsyncIterator[RoomEvent]:
        try:
            async for event in self._nio.room_get_event_relations(room_id, event_id, rel_type):
                if isinstance(event, nio.MegolmEvent):
                    if not self.e2ee:
                        continue
                    event.room_id = event.room_id or room_id  # not set on events fetched outside a sync
                    try:
                        event = self._nio.decrypt_event(event)
                    except _NIO_FAILURES as exc:  # one undecryptable vote must not lose the others
                        logger.info("skipped a reference to %s: %s", event_id, exc)
                        continue
                yield _room_event(room_id, event)
        except _RELATIONS_FAILURES as exc:
            raise PlatformAPIError(PLATFORM, "relations", f"{type(exc).__name__}: {exc}") from exc

    # -- syncing and E2EE ----------------------------------------------------------------------------------------

    def on_events(self, handle: Callable[[RoomEvent], None]) -> None:
        """Have `handle` called, during each sync, with every timeline event and invite it brings."""
        async def collect(room: Any, event: Any) -> None:
            handle(_room_event(str(room.room_id), event))
        self._nio.add_event_callback(collect, (nio.RoomMessageText, nio.ReactionEvent, nio.UnknownEvent,
                                               nio.RedactionEvent, nio.MegolmEvent, nio.InviteMemberEvent,
                                               nio.RoomMemberEvent))

    def on_room_keys(self, handle: Callable[[RoomKey], None]) -> None:
        """Have `handle` called with every room key that arrives (nio has imported it when it calls this)."""
        async def collect(key: Any) -> None:
            handle(RoomKey(str(key.room_id), str(key.session_id)))
        self._nio.add_to_device_callback(collect, (nio.RoomKeyEvent, nio.ForwardedRoomKeyEvent))

    async def sync(self, timeout_ms: int, *, state_only: bool = False) -> None:
        """One sync; `state_only` fetches room state and no timeline (nio needs the rooms to send)."""
        await _call("sync", self._nio.sync(timeout=0 if state_only else timeout_ms,
                                           sync_filter=_STATE_ONLY if state_only else None,
                                           full_state=True if state_only else None))
        synced, self._synced = self._synced, anyio.Event()
        synced.set()

    @property
    def next_batch(self) -> str:
        """The sync token to go on from."""
        return str(self._nio.next_batch or "")

    @next_batch.setter
    def next_batch(self, token: str) -> None:
        self._nio.next_batch = token

    def decrypt(self, event: RoomEvent) -> RoomEvent | None:
        """An `encrypted` event decrypted, now that its key may be here; None when it still cannot be."""
        try:
            decrypted = self._nio.decrypt_event(event.raw)
        except _NIO_FAILURES as exc:
            logger.debug("still cannot decrypt %s: %s", event.event_id, exc)
            return None
        return _room_event(event.room_id, decrypted)

    async def request_room_key(self, event: RoomEvent) -> None:
        """Ask the sender's devices for the key of an `encrypted` event (nio refuses a second request for one
        session with a `ProtocolError`, which `_call` translates)."""
        await _call("request_room_key", self._nio.request_room_key(event.raw))

    async def keep_keys(self) -> None:
        """What nio's sync_forever does between syncs for E2EE: upload, query and claim keys, send to-device."""
        c = self._nio
        if c.olm is None:
            return
        if c.outgoing_to_device_messages:
            await _call("send_to_device", c.send_to_device_messages())
        if c.should_upload_keys:
            await _call("keys_upload", c.keys_upload())
        if c.should_query_keys:
            await _call("keys_query", c.keys_query())
        if c.should_claim_keys:
            await _call("keys_claim", c.keys_claim(c.get_users_for_key_claiming()))
