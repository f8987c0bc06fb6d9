#!/usr/bin/env bash
# Container tools for building the image without a daemon: Debian's buildah and podman (vfs storage, chroot
# isolation), and debootstrap to make a base system from Debian's own mirror when no container registry is reachable.
# Idempotent; needs root (apt-get). Used by tests/deploy/test_image.py.
set -euo pipefail
need=()
for tool in buildah podman debootstrap; do
  command -v "$tool" >/dev/null || need+=("$tool")
done
if [ ${#need[@]} -eq 0 ]; then exit 0; fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  # Only the image build test needs them; it says what is missing and is skipped.
  echo "note: ${need[*]} missing (install with: sudo apt-get install -y ${need[*]})" >&2; exit 0
fi
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${need[@]}" fuse-overlayfs uidmap >/dev/null
