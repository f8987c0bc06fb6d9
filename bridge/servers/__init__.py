"""MCP servers: the session pool (`sessions`), one live client (`mcp_session`), how a session reaches its server
(`transports`, `stdio`, `prestart`, `message_bound`, `complete_by_default`), which session a use gets
(`session_keys`), and prompts and resources (`catalog`).

May use: `bridge.config`, `bridge.observe`, `bridge.text`, `bridge.forms`, `bridge.safety`, `bridge.model`,
`bridge.errors`. Never cards, server requests (the handlers are handed in) or calls.
"""
