"""`mcp-chat-bridge receipts keys | verify` as processes, and the JWKS a `run` process serves over HTTP."""

from __future__ import annotations

import base64
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx2
import pytest

from bridge.safety.receipts.canonical import tool_digest
from bridge.safety.receipts.keys import KEY_ENV, ReceiptKeys, ReceiptSettings
from bridge.safety.receipts.tokens import Decision, mint
from tests.cli.test_run import start
from tests.harness.console_run import wait_line
from tests.harness.hosts import patient

OLD, NEW = base64.b64encode(b"o" * 32).decode(), base64.b64encode(b"n" * 32).decode()
ARGS = {"target": "/srv/a", "force": True}


def receipts(*args: str | Path, key: str | None = f"{NEW},{OLD}") -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != KEY_ENV} | ({KEY_ENV: key} if key else {})
    return subprocess.run([sys.executable, "-m", "bridge.cli", "receipts", *map(str, args)], capture_output=True,
                          text=True, env=env, timeout=patient(60), check=False)


def token(key: str, tool: str = "destroy", now: float | None = None) -> str:
    settings = ReceiptSettings(ReceiptKeys.from_env({KEY_ENV: key}))
    return mint(settings, Decision("tool", "vault", "test:W:C", "i-1", tool_digest(tool, ARGS), ("test:U1",),
                                   {"required": 1}, tool=tool), now).token


def test_keys_prints_the_ring_as_a_jwks_signing_key_first() -> None:
    done = receipts("keys")
    assert done.returncode == 0, done.stderr
    jwks = json.loads(done.stdout)
    ring = ReceiptKeys.from_env({KEY_ENV: f"{NEW},{OLD}"}).jwks()
    assert jwks == ring and len(jwks["keys"]) == 2 and "d" not in jwks["keys"][0]  # public halves only
    assert jwks["keys"][0]["alg"] == "EdDSA" and jwks["keys"][0]["crv"] == "Ed25519"


def test_verify_checks_signature_expiry_and_the_request(tmp_path: Path) -> None:
    request = tmp_path / "request.json"
    request.write_text(json.dumps({"jsonrpc": "2.0", "id": 7, "method": "tools/call",
                                   "params": {"name": "destroy", "arguments": ARGS, "_meta": {"x": 1}}}))
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"name": "destroy", "arguments": {**ARGS, "force": False}}))

    old = token(OLD)  # signed before the rotation: still in the ring
    ok = receipts("verify", old, "--request", request)
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["tool"] == "destroy" and "valid for that request" in ok.stderr

    wrong = receipts("verify", old, "--request", other)
    assert wrong.returncode == 1 and "issued for another request" in wrong.stderr and wrong.stdout == ""
    expired = receipts("verify", token(NEW, now=time.time() - 3600))
    assert expired.returncode == 1 and "expired" in expired.stderr
    unknown = receipts("verify", token(base64.b64encode(b"x" * 32).decode()))
    assert unknown.returncode == 1 and "not in the key set" in unknown.stderr
    jwks = tmp_path / "jwks.json"
    jwks.write_text(json.dumps(ReceiptKeys.from_env({KEY_ENV: OLD}).jwks()))
    away = receipts("verify", old, "--jwks", jwks, "--server", "vault", key=None)
    assert away.returncode == 0, away.stderr
    nothing = receipts("verify", old, key=None)
    assert nothing.returncode == 2 and "pass --jwks FILE" in nothing.stderr and "Traceback" not in nothing.stderr


def test_run_serves_the_jwks_at_its_well_known_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(KEY_ENV, f"{NEW},{OLD}")
    with socket.socket() as probe:  # a free port, released for the bridge to take
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    proc, lines, _db, reader = start(tmp_path, "auto", http={"listen": f"127.0.0.1:{port}"})
    try:
        wait_line(lines, "mcp-chat-bridge")  # the banner: the bridge is up
        got = httpx2.get(f"http://127.0.0.1:{port}/.well-known/jwks.json", timeout=patient(10))
        assert got.status_code == 200 and got.headers["content-type"] == "application/jwk-set+json"
        assert got.json() == ReceiptKeys.from_env({KEY_ENV: f"{NEW},{OLD}"}).jwks()
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=patient(30))
        reader.join(timeout=patient(10))
        for pipe in (proc.stdin, proc.stdout, proc.stderr):
            assert pipe is not None
            pipe.close()
    assert proc.returncode == 0
