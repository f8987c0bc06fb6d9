"""Chat commands: the words parsed without I/O (`parsing`), what each does (`handlers`), and the agent that turns
a message to the bot into a model turn (`agent`).

May use: `bridge.calls`, `bridge.auth`, `bridge.requests`, `bridge.cards`, `bridge.servers` and below. Never the
host.
"""
