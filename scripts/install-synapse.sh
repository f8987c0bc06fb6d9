#!/usr/bin/env bash
# Create <repo>/.cache/synapse-venv with the pinned matrix-synapse used by the Matrix
# integration tests (tests/harness/synapse.py). Idempotent and safe to run concurrently: the
# logic (marker file + flock) lives in tests/harness/synapse.py, which the test
# harness also calls if the venv is missing.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
python="${PYTHON:-}"
if [ -z "$python" ]; then
    if [ -x "$root/.venv/bin/python" ]; then python="$root/.venv/bin/python"; else python=python3; fi
fi
exec "$python" "$root/tests/harness/synapse.py" install
