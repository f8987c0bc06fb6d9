#!/usr/bin/env bash
# checkov (Kubernetes and Dockerfile checks) in a virtual environment of its own under .cache/tools: it brings a
# large dependency tree whose pins must not move the bridge's own packages. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
TOOLS=.cache/tools
VERSION="checkov>=3.2,<4"
if [ -x "$TOOLS/checkov/bin/checkov" ] && [ "$(cat "$TOOLS/checkov/.spec" 2>/dev/null)" = "$VERSION" ]; then exit 0; fi
rm -rf "$TOOLS/checkov"
"$PY" -m venv "$TOOLS/checkov"
"$TOOLS/checkov/bin/python" -m pip install -q "$VERSION"
echo "$VERSION" > "$TOOLS/checkov/.spec"
