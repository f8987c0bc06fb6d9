#!/usr/bin/env bash
# Build bridge/web/apps/web/app-bridge.js: the host end of MCP Apps (`AppBridge`, `PostMessageTransport`) from the
# @modelcontextprotocol/ext-apps package pinned in tests/npm, bundled with its dependencies by the esbuild pinned
# there, and LICENSES.txt beside it with the licence of every package in the bundle.
#
# Why a bundle: the package's dist/src/app-bridge.js imports @modelcontextprotocol/client, @modelcontextprotocol/core
# and zod by bare name, which a browser cannot resolve without an import map and those packages served too; the page
# must work with no network beyond the bridge. Same inputs (tests/npm/package-lock.json), same bytes:
# tests/apps/test_bundle.py rebuilds it and compares.
#
# Usage: bash scripts/build_app_bridge.sh [OUTPUT_DIR]   (default: bridge/web/apps/web; needs `npm ci` in tests/npm)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
npm_dir="$root/tests/npm"
out_dir="${1:-$root/bridge/web/apps/web}"
mkdir -p "$out_dir"
version="$(node -p "require('$npm_dir/node_modules/@modelcontextprotocol/ext-apps/package.json').version")"
meta="$(mktemp)"
trap 'rm -f "$meta"' EXIT
cd "$npm_dir"
node_modules/.bin/esbuild app-bridge-entry.mjs --bundle --format=esm --minify --legal-comments=none --target=es2020 \
    --charset=utf8 --log-level=warning --metafile="$meta" --outfile="$out_dir/app-bridge.js" \
    "--banner:js=// @modelcontextprotocol/ext-apps $version AppBridge and its dependencies, bundled by scripts/build_app_bridge.sh. Licences: LICENSES.txt."
node - "$meta" "$out_dir/LICENSES.txt" <<'JS'
const fs = require("fs");
const path = require("path");
const [meta, out] = process.argv.slice(2);
const names = new Set();
for (const input of Object.keys(JSON.parse(fs.readFileSync(meta, "utf8")).inputs)) {
  const found = input.match(/node_modules\/((?:@[^/]+\/)?[^/]+)/);
  if (found) names.add(found[1]);
}
let text = "Licences of the packages bundled in app-bridge.js (built by scripts/build_app_bridge.sh).\n";
for (const name of [...names].sort()) {
  const dir = path.join("node_modules", name);
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  const file = fs.readdirSync(dir).filter((f) => /^licen[cs]e/i.test(f)).sort()[0];
  text += `\n${"=".repeat(78)}\n${name} ${pkg.version} (${pkg.license})\n${"=".repeat(78)}\n\n`;
  text += fs.readFileSync(path.join(dir, file), "utf8").trim() + "\n";
}
fs.writeFileSync(out, text);
JS
