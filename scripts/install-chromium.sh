#!/usr/bin/env bash
# Make sure Debian's headless-capable Chromium is at /usr/bin/chromium for the web-form browser tests
# (tests/webform). Playwright drives this system browser; it never downloads one (`playwright install` is not used).
# Idempotent; installs with apt only when missing and when running as root, otherwise says what to do.
set -euo pipefail
if [ -x /usr/bin/chromium ]; then exit 0; fi
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
else
    echo "error: /usr/bin/chromium is missing; install Debian's chromium package (sudo apt-get install chromium)" >&2
    exit 2
fi
