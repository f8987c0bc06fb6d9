#!/usr/bin/env bash
# Set up everything and run the demo or the whole test suite on a fresh Debian machine (Python 3.11, Node 20, npm).
#   bash scripts/dev.sh demo    # the console chat with the bundled demo MCP server
#   bash scripts/dev.sh test    # lint, types, import contracts and every test (installs npm peers, Synapse, Chromium,
#                               # PostgreSQL and the MCP conformance suite with Node 22)
#   bash scripts/dev.sh test-fast  # the in-process tests only (the markers in pyproject.toml), for a quick loop
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
VENV=.venv

make_venv() {
  if [ -x "$VENV/bin/python" ]; then return; fi
  if ! "$PY" -m venv "$VENV" 2>/dev/null; then
    # Debian ships venv separately; install it when we can, otherwise say what is missing.
    if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
      apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
      rm -rf "$VENV"; "$PY" -m venv "$VENV"
    else
      echo "error: '$PY -m venv' failed; install python3-venv (sudo apt-get install python3-venv)" >&2; exit 2
    fi
  fi
  "$VENV/bin/python" -m pip install -q --upgrade pip
}

install() {  # $1: extras
  make_venv
  local stamp="$VENV/.installed-$1" digest
  digest=$(sha256sum pyproject.toml | cut -c1-16)
  if [ "$(cat "$stamp" 2>/dev/null)" != "$digest" ]; then
    "$VENV/bin/python" -m pip install -q -e ".[$1]"
    echo "$digest" > "$stamp"
  fi
}

case "${1:-}" in
  demo)
    install core
    exec "$VENV/bin/mcp-chat-bridge" demo "${@:2}"
    ;;
  test)
    install slack,matrix,llm,otel,dev
    (cd tests/npm && npm ci --no-audit --no-fund --loglevel=error)
    bash scripts/install-synapse.sh
    bash scripts/install-chromium.sh
    bash scripts/install-postgres.sh
    bash scripts/install-containers.sh
    bash scripts/install-linters.sh
    bash scripts/install-conformance.sh
    "$VENV/bin/ruff" check bridge adapters tests bench
    "$VENV/bin/mypy"
    "$VENV/bin/lint-imports"
    exec "$VENV/bin/python" -m pytest "${@:2}"
    ;;
  test-fast)
    install slack,matrix,llm,otel,dev
    # npm ci again only when the lock file changed since the last one.
    [ tests/npm/node_modules/.package-lock.json -nt tests/npm/package-lock.json ] ||
      (cd tests/npm && npm ci --no-audit --no-fund --loglevel=error)
    exec "$VENV/bin/python" -m pytest -m "not (slow or synapse or postgres or subprocess or image or browser)" "${@:2}"
    ;;
  *)
    echo "usage: bash scripts/dev.sh demo|test|test-fast [args]" >&2; exit 2
    ;;
esac
