"""Per-person accounts on the console: the Connect prompt (the full authorization URL and its host) goes to stderr,
never to the chat's stdout, and once the person signs in the call they typed completes as them."""

from __future__ import annotations

import io
import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from adapters.console import ConsoleAdapter
from bridge.config.file import Config
from bridge.host import Host
from bridge.storage import open_store
from tests.harness.hosts import patient
from tests.servers.signin import Site, redirects, sign_in, site

pytestmark = [pytest.mark.anyio, pytest.mark.both_engines]

LINK = re.compile(r"https?://\S+/authorize\?\S+")


class Screen(io.StringIO):
    """A stream a test can wait on."""

    def __init__(self) -> None:
        super().__init__()
        self.changed = anyio.Event()

    def write(self, text: str) -> int:
        written = super().write(text)
        self.changed.set()
        self.changed = anyio.Event()
        return written

    async def wait_for(self, pattern: re.Pattern[str] | str) -> str:
        while True:
            found = re.search(pattern, self.getvalue())
            if found is not None:
                return found.group(0)
            await self.changed.wait()


@pytest.fixture
def web(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Site]:
    with site(tmp_path, monkeypatch) as s:
        yield s


async def test_the_connect_link_goes_to_stderr_and_the_call_completes(web: Site) -> None:
    config = Config(servers={"s": web.server()}, store=":memory:", **web.settings())
    out, err = Screen(), Screen()
    send, receive = anyio.create_memory_object_stream[str](10)

    async def typed() -> AsyncIterator[str]:
        async with receive:
            async for line in receive:
                yield line

    host = Host(config, await open_store(":memory:"))
    console = ConsoleAdapter(host, typed(), out, err=err)
    host.attach(console)
    with anyio.fail_after(patient(30)):
        async with host, redirects(host), anyio.create_task_group() as tg:
            tg.start_soon(console.serve)
            await send.send("!mcp call s whoami")
            link = await err.wait_for(LINK)
            visit = await sign_in(link, "ada")
            await out.wait_for("for ada")
            await send.aclose()
    assert visit.status == 200 and "Connect s" in err.getvalue() and "127.0.0.1" in err.getvalue()
    assert not LINK.search(out.getvalue())
