"""Remake the README's pictures from real runs: `python docs/screenshots.py` (from the repository's root).

- docs/images/console-form.png: `mcp-chat-bridge demo` in a tmux terminal, the demo's 13-field form answered line by
  line and accepted; the pane's text is captured and drawn in a monospace page by Debian's Chromium.
- docs/images/web-form.png: the same form opened from the link the console card offers when the bridge's HTTP
  server is on (`run -c` with the demo server over stdio), filled in on a phone-sized Chromium page.

Needs tmux, /usr/bin/chromium (scripts/install-chromium.sh) and Playwright (the `dev` extra); it never downloads a
browser. Everything runs in a temporary folder; nothing is sent anywhere.
"""

from __future__ import annotations

import html
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
IMAGES = ROOT / "docs/images"
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SESSION = "mcp-chat-bridge-screenshot"
PATIENCE = 60.0 * float(os.environ.get("MCP_BRIDGE_TEST_TIME_SCALE", "1"))

# The demo's form, answered as a person would (an empty line takes the default or skips an optional field).
ANSWERS = [
    ("Your name", "Ada"), ("Email", "ada@example.org"), ("Homepage", ""), ("Start date", "2026-12-04"),
    ("Pick-up time", "2026-12-04T09:30+01:00"), ("Travellers", ""), ("Budget", "150"), ("Window seat", "yes"),
    ("Climate", ""), ("City", "Oslo"), ("Room", ""), ("Activities", "hiking, food"), ("Extras", "1"),
]

TERMINAL_PAGE = """<!doctype html><meta charset="utf-8"><style>
body {{ margin: 0; background: #1e1e1e; }}
pre {{ display: inline-block; margin: 0; padding: 14px 18px; color: #d4d4d4; background: #1e1e1e;
       font: 13px/1.35 "DejaVu Sans Mono", monospace; width: 96ch; white-space: pre-wrap; }}
.typed {{ color: #9cdcfe; }}
</style><pre id="term">{text}</pre>"""


def wait_for(what: str, probe: Callable[[], str], pattern: str) -> str:
    """Poll `probe` until its text matches `pattern`; a run that never gets there fails with what it saw."""
    deadline = time.monotonic() + PATIENCE
    text = ""
    while time.monotonic() < deadline:
        text = probe()
        if re.search(pattern, text, re.M):
            return text
        time.sleep(0.1)
    raise SystemExit(f"screenshots: gave up waiting for {what}; last seen:\n{text}")


def tmux(*args: str) -> str:
    return subprocess.run(["tmux", *args], check=True, capture_output=True, text=True).stdout


def pane() -> str:
    return tmux("capture-pane", "-p", "-J", "-S", "-", "-t", SESSION).rstrip()


def console_card(state: Path) -> str:
    """Run the demo in tmux, answer its form, and return the terminal's text from the command on."""
    env = f"XDG_STATE_HOME={state} MCP_CHAT_BRIDGE_DEMO_KEY={'ab' * 32}"
    tmux("new-session", "-d", "-s", SESSION, "-x", "96", "-y", "80",
         f"cd {ROOT} && env {env} {sys.executable} -m bridge.cli demo")
    try:
        wait_for("the demo to start", pane, r"End with")
        tmux("send-keys", "-t", SESSION, "!mcp call demo plan_trip", "Enter")
        for number, (title, answer) in enumerate(ANSWERS, 1):
            wait_for(title, pane, rf"^│ \({number}/13\) {re.escape(title)}")
            tmux("send-keys", "-t", SESSION, "-l", answer)
            tmux("send-keys", "-t", SESSION, "Enter")
        wait_for("the summary", pane, r"^└ Submit\?")
        tmux("send-keys", "-t", SESSION, "submit", "Enter")
        text = wait_for("the result", pane, r"Trip planned")
    finally:
        subprocess.run(["tmux", "kill-session", "-t", SESSION], check=False, capture_output=True)
    lines = text.rstrip().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("!mcp call"))
    return "\n".join(line.rstrip() for line in lines[start:])


def terminal_html(text: str) -> str:
    """The captured text as a dark terminal; lines the person typed (no card frame) in another colour."""
    out = []
    for line in text.splitlines():
        escaped = html.escape(line)
        framed = line.startswith(("│", "┌", "└", "Trip planned", "demo."))
        out.append(escaped if framed else f'<span class="typed">{escaped}</span>')
    return TERMINAL_PAGE.format(text="\n".join(out))


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def web_form_link(folder: Path) -> tuple[subprocess.Popen[str], str]:
    """Start `run` with the demo server over stdio and the HTTP server on; ask for the form; return its web link."""
    port = free_port()
    config = folder / "bridge.yaml"
    config.write_text(f"""store: {folder / 'bridge.db'}
http:
  listen: 127.0.0.1:{port}
  public_url: http://127.0.0.1:{port}
servers:
  demo:
    title: Demo server
    command: {sys.executable}
    args: ["-m", "bridge.cli.demo.server"]
chat:
  console: {{}}
""", "utf-8")
    env = {**os.environ, "MCP_CHAT_BRIDGE_DEMO_KEY": "cd" * 32, "XDG_STATE_HOME": str(folder)}
    bridge = subprocess.Popen([sys.executable, "-m", "bridge.cli", "run", "-c", str(config)], cwd=ROOT, env=env,
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    assert bridge.stdin is not None and bridge.stdout is not None
    bridge.stdin.write("!mcp call demo plan_trip\n")
    bridge.stdin.flush()
    deadline = time.monotonic() + PATIENCE
    for line in bridge.stdout:
        found = re.search(r"fill it in on the web: (\S+)", line)
        if found:
            return bridge, found.group(1)
        if time.monotonic() > deadline:
            break
    bridge.kill()
    raise SystemExit("screenshots: the console card offered no web link")


def main() -> None:
    IMAGES.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp, sync_playwright() as playwright:
        folder = Path(tmp)
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page(viewport={"width": 900, "height": 600}, device_scale_factor=1)
            page.set_content(terminal_html(console_card(folder / "state")))
            page.locator("#term").screenshot(path=str(IMAGES / "console-form.png"))

            bridge, link = web_form_link(folder)
            try:
                phone = browser.new_context(viewport={"width": 390, "height": 844}, device_scale_factor=1,
                                            is_mobile=True, has_touch=True).new_page()
                phone.goto(link)
                phone.get_by_label("Your name").fill("Ada")
                phone.get_by_label("Email").fill("ada@example.org")
                phone.get_by_label("Start date").fill("2026-12-04")
                phone.get_by_label("Oslo").check()
                phone.screenshot(path=str(IMAGES / "web-form.png"), full_page=True)
            finally:
                bridge.kill()
                bridge.wait()
        finally:
            browser.close()
    for image in sorted(IMAGES.glob("*.png")):
        print(f"{image.relative_to(ROOT)}: {image.stat().st_size // 1024} KB")


if __name__ == "__main__":
    main()
