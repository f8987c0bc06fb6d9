"""Store and server addresses as people see them: never with a password."""

from __future__ import annotations

import pytest

from bridge.safety.addresses import shown


@pytest.mark.parametrize(("address", "expected"), [
    ("postgresql://bridge:supersecret123@127.0.0.1:1/bridge", "postgresql://bridge:***@127.0.0.1:1/bridge"),
    ("postgres://bridge:p@ss@w0rd@db/x?sslmode=require", "postgres://bridge:***@db/x?sslmode=require"),
    ("postgresql://bridge@/db?host=/run/pg&port=5432", "postgresql://bridge@/db?host=/run/pg&port=5432"),
    ("postgresql:///db?host=db&password=hunter2&user=b", "postgresql:///db?host=db&password=***&user=b"),
    ("host=db user=b password=hunter2 dbname=x", "host=db user=b password=*** dbname=x"),
    ("host=db password='a b c' dbname=x", "host=db password=*** dbname=x"),
    ("https://me:token123@mcp.example/mcp", "https://me:***@mcp.example/mcp"),
    ("./mcp-chat-bridge.db", "./mcp-chat-bridge.db"),
])
def test_credentials_never_show(address: str, expected: str) -> None:
    assert shown(address) == expected
