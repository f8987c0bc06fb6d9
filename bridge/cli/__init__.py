"""The `mcp-chat-bridge` command (`entry`; `python -m bridge.cli`): `run` and its checks (`preflight`), health
and metrics (`monitoring`), `call` and `tools` (`oneshot`), `import-servers` (`importing`), `audit`
(`audit_report`), failures as one line each (`failures`), and the demo server `init` and `demo` set up
(`demo`).

The top of the core: may use anything in `bridge`, never `adapters` (they are loaded by name).
"""
