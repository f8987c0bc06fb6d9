"""The `mcp-chat-bridge` command (`entry`; `python -m bridge.cli`): `run` and its checks (`preflight`), health
and metrics (`monitoring`), `call` and `tools` (`oneshot`), `import-servers` (`importing`), `audit`
(`audit_report`), and failures as one line each (`failures`).

The top of the core: may use anything in `bridge`, never `adapters` (they are loaded by name).
"""
