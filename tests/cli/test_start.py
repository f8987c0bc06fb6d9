"""Start time, as behaviour: what each quick command loads. The figures themselves are `bench/cold_start.py`'s."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import mcp.types
import yaml

from bridge import errors

HEAVY = ("mcp", "mcp_types", "pydantic", "anyio", "httpx2", "starlette", "prometheus_client", "openai", "anthropic",
         "slack_bolt", "nio", "jinja2")

LOADED = """
import json, sys
from bridge.cli.entry import main
try:
    code = main(sys.argv[1:])
except SystemExit as exit:
    code = exit.code
print(json.dumps([code, sorted({m.split(".")[0] for m in sys.modules})]))
"""


def loaded(*argv: str) -> tuple[int, set[str]]:
    done = subprocess.run([sys.executable, "-c", LOADED, *argv], capture_output=True, text=True, timeout=60,
                          check=False)
    code, modules = json.loads(done.stdout.splitlines()[-1])
    return code, set(modules)


def test_importing_the_cli_loads_nothing_heavy() -> None:
    code = "import bridge.cli.entry, json, sys; print(json.dumps(list(sys.modules)))"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    modules = {m.split(".")[0] for m in json.loads(done.stdout)}
    assert not modules & {*HEAVY, "jsonschema", "yaml", "asyncio"}


def test_version_loads_nothing_heavy() -> None:
    code, modules = loaded("--version")
    assert code == 0
    assert not modules & {*HEAVY, "jsonschema", "yaml", "asyncio"}


def test_check_config_loads_neither_the_sdk_nor_the_platform_libraries(tmp_path: Path) -> None:
    config = tmp_path / "bridge.yaml"
    config.write_text(yaml.safe_dump({
        "servers": {"demo": {"command": sys.executable, "args": ["-m", "bridge.cli.demo.server"]}},
        "llm": {"provider": "anthropic", "model": "m", "api_key": "k"}, "http": {"listen": "127.0.0.1:0"},
        "chat": {"console": {}}}))
    code, modules = loaded("check-config", str(config))
    assert code == 0
    assert not modules & {m for m in HEAVY if m != "anyio"}  # the console adapter's module imports anyio (cheap)


def test_the_error_codes_named_without_the_sdk_are_the_sdks() -> None:
    assert (errors.CONNECTION_CLOSED, errors.INTERNAL_ERROR, errors.INVALID_PARAMS, errors.INVALID_REQUEST,
            errors.METHOD_NOT_FOUND, errors.URL_ELICITATION_REQUIRED) == (
        mcp.types.CONNECTION_CLOSED, mcp.types.INTERNAL_ERROR, mcp.types.INVALID_PARAMS, mcp.types.INVALID_REQUEST,
        mcp.types.METHOD_NOT_FOUND, mcp.types.URL_ELICITATION_REQUIRED)
