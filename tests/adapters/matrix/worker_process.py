"""One bridge worker with the Matrix adapter in a process of its own, for tests that kill a worker (SIGKILL: nothing
of it runs after) or stop it (SIGTERM: a clean stop, as `mcp-chat-bridge run` does).

`python -m tests.adapters.matrix.worker_process SPEC`, SPEC a JSON object: `store` (a Postgres URL), `block` (the
`chat.matrix` block), `name` (the worker id), `lease` (seconds). Prints `ready` once its adapter has caught up.
"""

from __future__ import annotations

import json
import logging
import signal
import sys
from typing import Any

import anyio

from bridge.config.file import Config, ServerConfig
from tests.adapters.matrix import servers
from tests.adapters.matrix.harness import bridge


def fleet_config(store: str, lease: float) -> Config:
    """The config every worker of the fleet tests runs: a 2026 server (`colours`) and a legacy one (`orders`)."""
    return Config(servers={"colours": ServerConfig(name="colours", inprocess=servers.colours()),
                           "orders": ServerConfig(name="orders", inprocess=servers.orders(), protocol="legacy")},
                  store=store, worker_lease=lease)


async def main(spec: dict[str, Any]) -> None:
    config = fleet_config(spec["store"], float(spec["lease"]))
    with anyio.open_signal_receiver(signal.SIGTERM) as signals:
        async with bridge(config, spec["block"], spec["store"], worker_id=spec["name"]):
            print("ready", flush=True)
            async for _ in signals:
                break


if __name__ == "__main__":
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    anyio.run(main, json.loads(sys.argv[1]))
