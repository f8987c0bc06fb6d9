"""MCP servers: the session pool (`sessions`), one live client (`mcp_session`), how a session reaches its server
(`transports`, `stdio`, `prestart`, `message_bound`, `complete_by_default`), which session a use gets
(`session_keys`), prompts and resources (`catalog`), and the client side of requests a server sends as tasks
(`task_client`).

May use: `bridge.config`, `bridge.observe`, `bridge.text`, `bridge.door.forms`, `bridge.safety`, `bridge.door.model`,
`bridge.errors`. Never cards, server requests (the handlers are handed in) or calls.
"""
