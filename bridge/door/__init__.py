"""The door between adapters and the core: what crosses it and nothing else. `ports` holds the protocols (`Inbound`,
what an adapter calls; `Outbound`, what the core calls on a chat platform) and `model` the values they carry
(interactions, answers, cards, people).

May use: `bridge.forms`, `bridge.safety`, `bridge.errors` and libraries.
"""
