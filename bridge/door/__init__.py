"""The door between adapters and the core: what crosses it and nothing else. `ports` holds the protocols (`Inbound`,
what an adapter calls; `Outbound`, what the core calls on a chat platform), `model` the values they carry
(interactions, answers, cards, people) and `forms` the forms every adapter renders (built from a server's schema and
checked by the core).

May use: `bridge.safety`, `bridge.errors` and libraries.
"""
