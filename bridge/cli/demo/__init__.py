"""`mcp-chat-bridge demo`: the demo MCP server that ships with the bridge (`server`, also run as
`python -m bridge.cli.demo.server`), where the demo keeps its state (`state`), and the config it runs with (`setup`).

May use: `bridge.config`, `bridge.errors` and libraries.
"""
