"""The store's rows for tool calls running as tasks (store schema step 13): the server's task id, the server, the
conversation, the requester, the status card and the last status shown, and for an HTTP server the `Mcp-Session-Id`
the task is bound to. Written when the task is created and as its status changes (behind, with the next batch: no
poll waits for its bookkeeping), deleted when it ends. At start the rows nobody alive holds are taken over
(`claim_tasks`), so a status card is picked up again after a restart, or its conversation told the task was lost.
Mixed into `SqlStore`; both engines."""

from __future__ import annotations

import json
import time
from collections.abc import Mapping

from bridge.door.model import ConversationKey, MessageRef
from bridge.storage import codec
from bridge.storage.driver import Driver, Step
from bridge.storage.rows import StoredTask

TASK_COLUMNS = ("call_id, task_id, server, tool, conversation, requester, status, status_message, card, http_session,"
                " started_at")


def _card(conversation: ConversationKey, text: str | None) -> MessageRef | None:
    if not text:
        return None
    data = json.loads(text)
    return MessageRef(conversation, {str(k): str(v) for k, v in data.items()}) if isinstance(data, Mapping) else None


def stored_task(row: tuple[object, ...]) -> StoredTask:
    conversation = ConversationKey.from_id(str(row[4]))
    return StoredTask(str(row[0]), str(row[1]), str(row[2]), str(row[3]), conversation,
                      codec.load_actor(str(row[5]) if row[5] is not None else None), str(row[6]), str(row[7] or ""),
                      _card(conversation, str(row[8]) if row[8] is not None else None), str(row[9] or ""),
                      float(str(row[10])))


class TaskRows:
    _db: Driver
    worker_id: str

    async def record_task(self, task: StoredTask) -> None:
        card = json.dumps(dict(task.card.data)) if task.card is not None else None
        await self._db.write_behind([Step(
            f"INSERT INTO tasks ({TASK_COLUMNS}, worker) VALUES (?,?,?,?,?,?,?,?,?,?,?,?) ON CONFLICT (call_id) DO"
            " UPDATE SET status = excluded.status, status_message = excluded.status_message, card = excluded.card,"
            " worker = excluded.worker",
            (task.call_id, task.task_id, task.server, task.tool, task.conversation.id(),
             codec.dump_actor(task.requester), task.status, task.status_message, card, task.http_session,
             task.started_at, self.worker_id))])

    async def task_status(self, call_id: str, status: str, message: str) -> None:
        await self._db.write_behind([Step("UPDATE tasks SET status = ?, status_message = ? WHERE call_id = ?",
                                          (status, message, call_id))])

    async def end_task(self, call_id: str) -> None:
        await self._db.write_behind([Step("DELETE FROM tasks WHERE call_id = ?", (call_id,))])

    async def claim_tasks(self, now: float | None = None) -> list[StoredTask]:
        """Take the tasks no live worker holds (an earlier run's, a dead worker's): this worker's from now."""
        now = time.time() if now is None else now
        me = self.worker_id
        orphan = "(worker IS NULL OR worker = ? OR worker NOT IN (SELECT id FROM workers WHERE lease_until >= ?))"
        done = await self._db.transaction([Step(
            f"UPDATE tasks SET worker = ? WHERE {orphan} RETURNING {TASK_COLUMNS}", (me, me, now))])
        return sorted((stored_task(tuple(r)) for r in done[-1].rows), key=lambda t: t.started_at)
