"""`mcp-chat-bridge run` as a process with the HTTP server and a public address: servers are offered apps, the console
prints the person's own link under a result whose tool has one, and the page and the app's view answer on it (the
sandbox on the public address's other spelling, localhost)."""

from __future__ import annotations

import re
from pathlib import Path

import httpx2
import yaml

from tests.apps.servers import app_server
from tests.harness.console_run import finish, free_port, launch, wait_line

LINK = re.compile(r"(http://127\.0\.0\.1:\d+/app/\S+)")


def test_run_offers_an_apps_link_on_the_console_and_serves_its_page(tmp_path: Path) -> None:
    port = free_port()
    basic = app_server("basic", "server-basic-vanillajs")
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({
        "store": str(tmp_path / "bridge.db"),
        "servers": {"basic": {"command": basic.command, "args": list(basic.args)}},
        "http": {"listen": f"127.0.0.1:{port}", "public_url": f"http://127.0.0.1:{port}"},
        "chat": {"console": {}}}))
    proc, lines, reader = launch(config)
    try:
        assert proc.stdin is not None
        wait_line(lines, "mcp-chat-bridge")  # the banner: the bridge is up
        proc.stdin.write("!mcp call basic get-time\n")
        proc.stdin.flush()
        offered = wait_line(lines, "[app] basic")
        match = LINK.search(offered)
        assert match is not None, offered
        url = match.group(1)
        with httpx2.Client(timeout=30) as browser:
            page = browser.get(url)
            assert page.status_code == 200 and "App of the MCP server basic" in page.text
            assert f"frame-src http://localhost:{port}" in page.headers["content-security-policy"]
            view = browser.get(url + "/view").json()
            assert "<html" in view["html"].lower() and view["sandbox"].startswith(f"http://localhost:{port}/")
            assert httpx2.get(view["sandbox"], timeout=30).status_code == 200
            assert httpx2.get(url, timeout=30).status_code == 403  # another client: not the browser holding it
    finally:
        finish(proc, reader)
    assert proc.returncode == 0
