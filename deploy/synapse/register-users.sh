#!/bin/sh
# Register the bot (and optionally a person) on the compose stack's Synapse with its shared registration secret.
# Run by the synapse-bootstrap service after Synapse is healthy; a user who can already log in is left alone, so the
# stack can be started again and again. Passwords come from the environment and are never printed.
set -eu
HS=http://synapse:8008
CONFIG=/data/homeserver.yaml

can_log_in() {  # $1 user, $2 password
  body=$(printf '{"type":"m.login.password","identifier":{"type":"m.id.user","user":"%s"},"password":"%s"}' "$1" "$2")
  curl -fsS -o /dev/null -X POST -H 'Content-Type: application/json' --data "$body" "$HS/_matrix/client/v3/login"
}

register() {  # $1 user, $2 password
  if can_log_in "$1" "$2"; then
    echo "@$1:localhost is registered already"
    return
  fi
  register_new_matrix_user -c "$CONFIG" --no-admin -u "$1" -p "$2" "$HS"
  echo "registered @$1:localhost"
}

register mcp-bot "$MATRIX_BOT_PASSWORD"
if [ -n "${MATRIX_USER_PASSWORD:-}" ]; then
  register you "$MATRIX_USER_PASSWORD"
fi
