"""The store's rows of tasks run for servers (`bridge.storage.served_tasks` says what they are). Mixed into
`SqlStore`; both engines."""

from __future__ import annotations

import time

from bridge.storage.driver import Driver, Row, Step
from bridge.storage.served_tasks import ServedTask, TaskState

_COLUMNS = ("id, server, kind, conversation, status, status_message, interaction_id, result, error, created_at,"
            " updated_at, ttl_ms, expires_at, worker")
_OPEN = "status NOT IN ('completed', 'failed', 'cancelled')"


def _row(row: Row) -> ServedTask:
    return ServedTask(str(row[0]), str(row[1]), str(row[2]), str(row[3]), row[4], str(row[5]), row[6], row[7],
                      row[8], float(row[9]), float(row[10]), int(row[11]), float(row[12]),
                      str(row[13] or ""))


class ServedTaskRows:
    _db: Driver
    worker_id: str

    async def create_served_task(self, task: ServedTask, most: int) -> bool:
        """Record a new task unless its server already has `most` tasks going (on any worker); rows past their
        retention are dropped first. False when refused."""
        now = time.time()
        done = await self._db.transaction([
            Step("DELETE FROM served_tasks WHERE expires_at <= ?", (now,)),
            Step(f"INSERT INTO served_tasks ({_COLUMNS}) SELECT ?,?,?,?,?,?,?,?,?,?,?,?,?,?"
                 f" WHERE (SELECT count(*) FROM served_tasks WHERE server = ? AND {_OPEN}) < ?",
                 (task.id, task.server, task.kind, task.conversation, task.status, task.status_message,
                  task.interaction_id, task.result, task.error, task.created_at, task.updated_at, task.ttl_ms,
                  task.expires_at, self.worker_id, task.server, most)),
        ])
        return done[-1].count == 1

    async def served_task(self, task_id: str) -> ServedTask | None:
        rows = await self._db.fetch(f"SELECT {_COLUMNS} FROM served_tasks WHERE id = ?", (task_id,))
        return _row(rows[0]) if rows else None

    async def update_served_task(self, task_id: str, status: TaskState, message: str, *,
                                 interaction_id: str | None = None, result: str | None = None,
                                 error: str | None = None) -> bool:
        """Move a task that has not ended to `status`; False if it had ended (its first end stands)."""
        done = await self._db.transaction([Step(
            f"UPDATE served_tasks SET status = ?, status_message = ?, interaction_id = ?, result = ?, error = ?,"
            f" updated_at = ? WHERE id = ? AND {_OPEN}",
            (status, message, interaction_id, result, error, time.time(), task_id))])
        return done[0].count == 1

    async def end_served_tasks(self, message: str) -> int:
        """At start: the tasks an earlier process of this worker ran end as failed (nothing runs them now)."""
        done = await self._db.transaction([Step(
            f"UPDATE served_tasks SET status = 'failed', status_message = ?, interaction_id = NULL, error = ?,"
            f" updated_at = ? WHERE worker = ? AND {_OPEN}",
            (message, None, time.time(), self.worker_id))])
        return done[0].count
