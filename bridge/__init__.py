"""mcp-chat-bridge: an MCP host that lives in team chat.

The core (this package) never imports a chat platform library; adapters in `adapters/` translate platform events
into `bridge.model` values and render cards back.
"""

__version__ = "0.1.0"
