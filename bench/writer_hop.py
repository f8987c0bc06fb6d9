"""What a write on a SQLite file store pays beyond its commit: the hop from the event loop to the store's writer
thread and back.

`--writes` writes one after another through the driver (`SqliteDriver.transaction`), plain (`synchronous=NORMAL`,
no sync) and then `--durable` of them synced, on asyncio and on trio. For each: the median awaited on the event loop,
the median of the commit itself in the writer thread (`SqliteDriver._commit`, timed where it runs), and their
difference, the hop. The plain line is the steadier one: a durable commit's hop also includes waking the thread
after its sync, which on a busy machine is a wait for a CPU. Run: `python -m bench.writer_hop [--help]`.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from typing import Any

import anyio
import anyio.lowlevel

from bridge.storage.driver import Step
from bridge.storage.sqlite import SqliteDriver


async def measure(backend: str, writes: int, durable_writes: int) -> None:
    inner: list[float] = []
    commit = SqliteDriver._commit

    def timed(self: SqliteDriver, *args: Any) -> None:
        t = time.perf_counter()
        try:
            commit(self, *args)
        finally:
            inner.append(time.perf_counter() - t)

    SqliteDriver._commit = timed  # type: ignore[method-assign,assignment]  # timed where it runs, in the writer thread
    try:
        with tempfile.TemporaryDirectory(prefix="bench-hop-") as tmp:
            driver = await SqliteDriver.open(f"{tmp}/hop.db")
            try:
                await driver.transaction([Step("CREATE TABLE t (n INTEGER, v TEXT)")])
                for durable, n in ((False, writes), (True, durable_writes)):
                    awaited: list[float] = []
                    inner.clear()
                    for i in range(n):
                        t = time.perf_counter()
                        await driver.transaction([Step("INSERT INTO t VALUES (?, ?)", (i, "x" * 100))],
                                                 durable=durable)
                        awaited.append(time.perf_counter() - t)
                        await anyio.lowlevel.checkpoint()  # as the bridge does other work between writes
                    outer_us, inner_us = statistics.median(awaited) * 1e6, statistics.median(inner) * 1e6
                    print(f"{backend:<8} {'durable' if durable else 'plain':<8} {n:>6} {outer_us:>9.1f} "
                          f"{inner_us:>10.1f} {outer_us - inner_us:>7.1f}")
            finally:
                await driver.aclose()
    finally:
        SqliteDriver._commit = commit  # type: ignore[method-assign]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.writer_hop", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--durable", type=int, default=300)
    parser.add_argument("--backend", choices=["asyncio", "trio", "both"], default="both")
    args = parser.parse_args(argv)
    print(f"{'backend':<8} {'writes':<8} {'count':>6} {'awaited':>9} {'in thread':>10} {'hop':>7}   (µs, medians)")
    for backend in ["asyncio", "trio"] if args.backend == "both" else [args.backend]:
        anyio.run(measure, backend, args.writes, args.durable, backend=backend)
    return 0


if __name__ == "__main__":
    sys.exit(main())
