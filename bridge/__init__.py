"""mcp-chat-bridge: an MCP host that lives in team chat.

The core (this package) never imports a chat platform library; adapters in `adapters/` translate platform events
into `bridge.door.model` values and render cards back.
"""

__version__ = "0.1.0"

DEFAULT_STORE = "./mcp-chat-bridge.db"
"""Where the store is when the config names none (here, so the CLI can name it without loading the config module)."""
