#!/usr/bin/env bash
# Make Debian's PostgreSQL server binaries available for the Postgres store tests (tests/harness/postgres.py), which
# start a throwaway cluster of their own in a temporary folder. Idempotent: does nothing when `initdb` is already
# there. Installs the `postgresql` package when missing and we are root; otherwise says what is missing (the tests
# then skip, saying why).
set -euo pipefail
find_initdb() {
  if [ -n "${PG_BINDIR:-}" ] && [ -x "$PG_BINDIR/initdb" ]; then return 0; fi
  compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null || command -v initdb >/dev/null
}
if find_initdb; then exit 0; fi
if command -v apt-get >/dev/null && [ "$(id -u)" = 0 ]; then
  echo "installing postgresql (Debian package) for the Postgres store tests" >&2
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq postgresql >/dev/null
  find_initdb && exit 0
fi
echo "warning: PostgreSQL server binaries (initdb) not found; install the postgresql package" \
     "(sudo apt-get install postgresql) or the Postgres store tests will be skipped" >&2
