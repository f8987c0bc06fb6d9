"""The store's rows for calls running (any era): recorded when a call starts, deleted when it ends, so that after a
crash (of this process, or of a worker on a shared store) the conversations of the calls it cut short are told. Both
are written behind (`Driver.write_behind`): no call waits for its own bookkeeping. Each
row is owned by its worker; `reap_workers` hands a lapsed worker's rows to the survivor that tells them. Mixed into
`SqlStore`; both engines."""

from __future__ import annotations

import time

from bridge.door.model import ConversationKey
from bridge.storage.driver import Driver, Step
from bridge.storage.rows import RunningCall

RUNNING_COLUMNS = "id, conversation, server, tool, started_at"


class RunningRows:
    _db: Driver
    worker_id: str

    async def record_running_call(self, call_id: str, conversation: ConversationKey, server: str, tool: str) -> None:
        await self._db.write_behind([Step(
            f"INSERT INTO running_calls ({RUNNING_COLUMNS}, worker) VALUES (?,?,?,?,?,?) ON CONFLICT (id) DO UPDATE"
            " SET conversation = excluded.conversation, server = excluded.server, tool = excluded.tool,"
            " started_at = excluded.started_at, worker = excluded.worker",
            (call_id, conversation.id(), server, tool, time.time(), self.worker_id))])

    async def end_running_call(self, call_id: str) -> None:
        await self._db.write_behind([Step("DELETE FROM running_calls WHERE id = ?", (call_id,))])

    async def running_calls(self) -> list[RunningCall]:
        """This worker's calls on record, oldest first."""
        rows = await self._db.fetch(f"SELECT {RUNNING_COLUMNS} FROM running_calls WHERE worker = ?"
                                    " ORDER BY started_at", (self.worker_id,))
        return [RunningCall(*row) for row in rows]


def running_call(row: tuple[object, ...]) -> RunningCall:
    return RunningCall(str(row[0]), str(row[1]), str(row[2]), str(row[3]), float(str(row[4])))
