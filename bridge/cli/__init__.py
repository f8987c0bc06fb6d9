"""The `mcp-chat-bridge` command (`entry`; `python -m bridge.cli`): `run` and its checks (`preflight`), health
and metrics (`monitoring`), `call` and `tools` (`call_tools`), the operator's commands (`operator`),
`import-servers` (`importing`, `merging`), `audit` (`audit_report`), `receipts` (`receipts`), failures as one line
each (`failures`), and the demo server `init` and `demo` set up (`demo`).

The top of the core: may use anything in `bridge`, never `adapters` (they are loaded by name).
"""
