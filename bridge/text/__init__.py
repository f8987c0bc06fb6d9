"""Wording: what people read, the same on every platform. Plain-text rendering (`plain`), outcomes and progress
and the replies to a late decision (`presentation`), MCP content as text (`content`), the start of a huge text
(`excerpt`), `show <id>` (`details`), time left (`durations`), and a card asked one question at a time
(`questions`).

Pure, no I/O. May use: `bridge.door.forms`, `bridge.safety`, `bridge.door.model`, `bridge.errors`.
"""
