"""Guards for a shared host: the one cleaner of untrusted text (`sanitize`), where a link goes (`browser_url`),
secrets detected (`secret_names`) and kept out of logs and chat (`redaction`), addresses without credentials
(`addresses`), the bounds on load (`limits`, `ratelimit`, `lru`), and signed receipts of decisions a server can check
without trusting the chat (`receipts`).

Pure, the bottom of the core: may use only `bridge.errors` and libraries.
"""
