"""A store or server address as people may see it: in errors, logs and `audit` output, never its credentials.

A `postgresql://bridge:secret@db/bridge` store keeps its user and host (what one needs to find the database) and loses
the password: `postgresql://bridge:***@db/bridge`. So does a `password=` in its query or a libpq key=value string,
and any user info of a server URL. A plain file path comes back as it is.
"""

from __future__ import annotations

import re

MASK = "***"

_USERINFO = re.compile(r"^(?P<scheme>[A-Za-z][A-Za-z0-9+.-]*://)(?P<user>[^@/?#]*)@")
_PASSWORD_PARAM = re.compile(
    r"(?P<key>(?:^|[?&;\s])(?:password|sslpassword)\s*=\s*)(?P<value>'(?:[^'\\]|\\.)*'|[^&;\s]*)", re.I)


def shown(address: str) -> str:
    """`address` with every credential it holds replaced by `***`."""
    text = str(address)
    match = _USERINFO.match(text)
    if match:
        user = match.group("user")
        # The last '@' before the host ends the user info (a password may itself hold '@' unescaped).
        rest = text[match.end():]
        while "@" in rest.split("/", 1)[0].split("?", 1)[0]:
            extra, rest = rest.split("@", 1)
            user += "@" + extra
        name = user.split(":", 1)[0]
        text = f"{match.group('scheme')}{name}{':' + MASK if ':' in user else ''}@{rest}"
    return _PASSWORD_PARAM.sub(lambda m: m.group("key") + MASK, text)
